package pulsartopic_test

import (
	"time"

	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/pulsartopic"
	"github.com/boulevard-go/boulevard/validate"
)

// Guarantee: invalid options are refused by New with errors naming each
// field and its rule, before any client is made.
func TestOptionsValidation(t *testing.T) {
	cases := []struct {
		o           pulsartopic.Options[int]
		field, rule string
	}{
		{pulsartopic.Options[int]{ServiceURL: "pulsar://x:6650"}, "pulsartopic.codec", "required"},
		{pulsartopic.Options[int]{Codec: topic.IntCodec{}}, "pulsartopic.serviceURL", "required_without"},
		{pulsartopic.Options[int]{Codec: topic.IntCodec{}, ServiceURL: "pulsar://x:6650", Client: sharedClient{}}, "pulsartopic.serviceURL", "excluded_with"},
		{pulsartopic.Options[int]{ServiceURL: "pulsar://x:6650", Codec: topic.IntCodec{}, Partitions: -1}, "pulsartopic.partitions", "gte"},
		{pulsartopic.Options[int]{ServiceURL: "pulsar://x:6650", Codec: topic.IntCodec{}, Partitions: pulsartopic.MaxPartitions + 1}, "pulsartopic.partitions", "lte"},
		{pulsartopic.Options[int]{ServiceURL: "pulsar://x:6650", Codec: topic.IntCodec{}, MaxPendingMessages: -1}, "pulsartopic.maxPendingMessages", "gte"},
		{pulsartopic.Options[int]{ServiceURL: "pulsar://x:6650", Codec: topic.IntCodec{}, MaxPendingMessages: pulsartopic.MaxPendingSlots + 1}, "pulsartopic.maxPendingMessages", "lte"},
		{pulsartopic.Options[int]{ServiceURL: "pulsar://x:6650", Codec: topic.IntCodec{},
			Partitions: pulsartopic.MaxPartitions, MaxPendingMessages: pulsartopic.MaxPendingSlots}, "pulsartopic.maxPendingMessages", "pendingSlots"},
		{pulsartopic.Options[int]{ServiceURL: "pulsar://x:6650", Codec: topic.IntCodec{},
			Partitions: 2, MaxPendingMessages: pulsartopic.MaxPendingSlots/2 + 1}, "pulsartopic.maxPendingMessages", "pendingSlots"},
		{pulsartopic.Options[int]{ServiceURL: "pulsar://x:6650", Codec: topic.IntCodec{}, NackRedeliveryDelay: -time.Second}, "pulsartopic.nackRedeliveryDelay", "gte"},
		{pulsartopic.Options[int]{ServiceURL: "pulsar://x:6650", Codec: topic.IntCodec{}, NackRedeliveryDelay: 2}, "pulsartopic.nackRedeliveryDelay", "gte"},
		{pulsartopic.Options[int]{ServiceURL: "pulsar://x:6650", Codec: topic.IntCodec{}, Namespace: "a/b"}, "pulsartopic.namespace", "excludesall"},
		{pulsartopic.Options[int]{ServiceURL: "pulsar://x:6650", Codec: topic.IntCodec{}, SubscribeTimeout: -time.Second}, "pulsartopic.subscribeTimeout", "gte"},
		{pulsartopic.Options[int]{ServiceURL: "pulsar://x:6650", Codec: topic.IntCodec{}, SubscribeTimeout: time.Hour + time.Second}, "pulsartopic.subscribeTimeout", "lte"},
		{pulsartopic.Options[int]{ServiceURL: "pulsar://x:6650", Codec: topic.IntCodec{}, AdminTimeout: time.Hour + time.Second}, "pulsartopic.adminTimeout", "lte"},
		{pulsartopic.Options[int]{ServiceURL: "pulsar://x:6650", Codec: topic.IntCodec{}, MaxReconnectToBroker: -1}, "pulsartopic.maxReconnectToBroker", "gte"},
		{pulsartopic.Options[int]{ServiceURL: "pulsar://x:6650", Codec: topic.IntCodec{}, MaxReconnectToBroker: pulsartopic.MaxReconnectToBrokerLimit + 1}, "pulsartopic.maxReconnectToBroker", "lte"},
		{pulsartopic.Options[int]{ServiceURL: "pulsar://x:6650", Codec: topic.IntCodec{}, SendTimeout: pulsartopic.MaxSendTimeout + 1}, "pulsartopic.sendTimeout", "lte"},
		{pulsartopic.Options[int]{ServiceURL: "pulsar://x:6650", Codec: topic.IntCodec{}, BatchingMaxPublishDelay: pulsartopic.MaxBatchingMaxPublishDelay + 1}, "pulsartopic.batchingMaxPublishDelay", "lte"},
		{pulsartopic.Options[int]{ServiceURL: "pulsar://x:6650", Codec: topic.IntCodec{}, NackRedeliveryDelay: pulsartopic.MaxNackRedeliveryDelay + 1}, "pulsartopic.nackRedeliveryDelay", "lte"},
		{pulsartopic.Options[int]{ServiceURL: "pulsar://x:6650", Codec: topic.IntCodec{},
			ClientOptions: pulsar.ClientOptions{URL: "pulsar://y:6650"}}, "pulsartopic.clientOptions.url", "owned"},
		{pulsartopic.Options[int]{Codec: topic.IntCodec{}, Client: sharedClient{},
			ClientOptions: pulsar.ClientOptions{URL: "pulsar://y:6650"}}, "pulsartopic.clientOptions.url", "excluded_with"},
	}
	for _, c := range cases {
		be, err := pulsartopic.New(c.o)
		if err == nil {
			_ = be.Close(context.Background())
		}
		var errs validate.Errors
		if !errors.As(err, &errs) || !errs.Has(c.field, c.rule) {
			t.Errorf("New(%v) = %v, want %s %s", c.o, err, c.field, c.rule)
		}
	}
}

// Guarantee: each bound of the backend's sizes and timeouts is itself
// accepted, and the value just past it is refused with an error naming the
// field and the rule.
func TestOptionsBoundsAreInclusive(t *testing.T) {
	type opts = pulsartopic.Options[int]
	admin := func(o *opts, v int64) { o.AdminTimeout = time.Duration(v) }
	batching := func(o *opts, v int64) { o.BatchingMaxPublishDelay = time.Duration(v) }
	nack := func(o *opts, v int64) { o.NackRedeliveryDelay = time.Duration(v) }
	hour := int64(time.Hour)
	for _, c := range []struct {
		field, rule string
		set         func(*opts, int64)
		at, past    int64
	}{
		{"pulsartopic.adminTimeout", "gte", admin, 0, -1},
		{"pulsartopic.adminTimeout", "lte", admin, hour, hour + 1},
		{"pulsartopic.subscribeTimeout", "lte", func(o *opts, v int64) { o.SubscribeTimeout = time.Duration(v) }, hour, hour + 1},
		{"pulsartopic.sendTimeout", "lte", func(o *opts, v int64) { o.SendTimeout = time.Duration(v) },
			int64(pulsartopic.MaxSendTimeout), int64(pulsartopic.MaxSendTimeout) + 1},
		{"pulsartopic.batchingMaxPublishDelay", "gte", batching, 0, -1},
		{"pulsartopic.batchingMaxPublishDelay", "lte", batching,
			int64(pulsartopic.MaxBatchingMaxPublishDelay), int64(pulsartopic.MaxBatchingMaxPublishDelay) + 1},
		{"pulsartopic.nackRedeliveryDelay", "gte", nack, int64(time.Millisecond), int64(time.Millisecond) - 1},
		{"pulsartopic.nackRedeliveryDelay", "lte", nack, int64(pulsartopic.MaxNackRedeliveryDelay), int64(pulsartopic.MaxNackRedeliveryDelay) + 1},
		{"pulsartopic.maxPendingMessages", "lte", func(o *opts, v int64) { o.MaxPendingMessages = int(v) },
			pulsartopic.MaxPendingSlots, pulsartopic.MaxPendingSlots + 1},
		{"pulsartopic.maxReconnectToBroker", "lte", func(o *opts, v int64) { o.MaxReconnectToBroker = int(v) },
			pulsartopic.MaxReconnectToBrokerLimit, pulsartopic.MaxReconnectToBrokerLimit + 1},
	} {
		at, past := opts{ServiceURL: "pulsar://x:6650", Codec: topic.IntCodec{}}, opts{ServiceURL: "pulsar://x:6650", Codec: topic.IntCodec{}}
		c.set(&at, c.at)
		c.set(&past, c.past)
		if err := at.WithDefaults().Validate(); err != nil {
			t.Errorf("%s at its %s bound %d refused: %v", c.field, c.rule, c.at, err)
		}
		var errs validate.Errors
		if err := past.WithDefaults().Validate(); !errors.As(err, &errs) || len(errs) != 1 || !errs.Has(c.field, c.rule) {
			t.Errorf("%s %d, just past its %s bound: Validate = %v, want one %s error on %s", c.field, c.past, c.rule, err, c.rule, c.field)
		}
	}
}

// Guarantee: the pending queues pulsar-client-go reserves for a topic,
// MaxPendingMessages for each of its partitions, stay within
// MaxPendingSlots whatever the partition count: the default
// MaxPendingMessages shrinks for more than 1048 partitions instead of
// being refused, and a topic declared at the largest accepted product
// reserves tens of MiB, not the gigabytes MaxPartitions pending queues of
// 2^20 entries would take.
func TestPendingQueuesStayWithinTheirBound(t *testing.T) {
	for _, parts := range []int{0, 1, 1048, 1049, pulsartopic.MaxPartitions} {
		o := pulsartopic.Options[int]{ServiceURL: "pulsar://x:6650", Codec: topic.IntCodec{}, Partitions: parts}.WithDefaults()
		if err := o.Validate(); err != nil {
			t.Errorf("partitions %d: the defaults are refused: %v", parts, err)
		}
		if got := o.MaxPendingMessages * max(parts, 1); got > pulsartopic.MaxPendingSlots {
			t.Errorf("partitions %d: default maxPendingMessages %d reserves %d slots, more than %d",
				parts, o.MaxPendingMessages, got, pulsartopic.MaxPendingSlots)
		}
	}
	b := testbroker.Pulsar(t)
	o := testOptions[int](b, topic.IntCodec{})
	o.Partitions = 4
	o.MaxPendingMessages = pulsartopic.MaxPendingSlots / o.Partitions
	be := newBackend(t, o)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	h := newHandle(t, be, "t", topic.Options{})
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(h)
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
		t.Fatalf("declaring a topic at the largest accepted pending queues allocated %d MiB", got>>20)
	}
}

// Guarantee: options printed with any verb or logged show neither the
// service URL's password nor the authentication token.
func TestOptionsNeverShowSecrets(t *testing.T) {
	const secret = "s3cret-Tok3n"
	o := pulsartopic.Options[int]{
		ServiceURL:    "pulsar://user:" + secret + "@broker:6650",
		Codec:         topic.IntCodec{},
		ClientOptions: pulsar.ClientOptions{Authentication: pulsar.NewAuthenticationToken(secret)},
	}
	var log strings.Builder
	slog.New(slog.NewTextHandler(&log, nil)).Info("options", "o", o)
	for _, s := range []string{fmt.Sprint(o), fmt.Sprintf("%+v", o), fmt.Sprintf("%#v", o), fmt.Sprintf("%q", o), log.String()} {
		if strings.Contains(s, secret) {
			t.Fatalf("the secret shows in %q", s)
		}
	}
	if !strings.Contains(o.String(), "authentication: true") {
		t.Fatalf("String %q does not say authentication is set", o)
	}
}

// Guarantee: the options print the reconnection bound they give every
// consumer, so that a log line of them tells whether a subscription may
// give up.
func TestOptionsPrintTheirReconnectionBound(t *testing.T) {
	o := pulsartopic.Options[int]{MaxReconnectToBroker: 3}
	if got := fmt.Sprint(o); !strings.Contains(got, "maxReconnectToBroker: 3") {
		t.Fatalf("options print %s; want maxReconnectToBroker: 3", got)
	}
}

// sharedClient stands for a client made elsewhere.
type sharedClient struct{ pulsar.Client }

// Guarantee: a password written in the service URL without percent-encoding
// (with a "/", "?", "#" or space, where a URL's user information cannot
// tell where it ends) shows in no printed or logged form of the options
// either, nor in New's error.
func TestOptionsNeverShowAPasswordThatDoesNotParse(t *testing.T) {
	const tail = "s3cret-7b1"
	for _, pw := range []string{"p/" + tail, "p?" + tail, "p#" + tail, "p " + tail} {
		o := pulsartopic.Options[int]{ServiceURL: "pulsar://user:" + pw + "@broker:6650", Codec: topic.IntCodec{}}
		var log strings.Builder
		slog.New(slog.NewTextHandler(&log, nil)).Info("options", "o", o)
		shown := []string{fmt.Sprint(o), fmt.Sprintf("%+v", o), fmt.Sprintf("%#v", o), fmt.Sprintf("%q", o), log.String()}
		if be, err := pulsartopic.New(o); err == nil {
			shown = append(shown, be.String())
			_ = be.Close(context.Background())
		} else {
			shown = append(shown, err.Error())
		}
		for _, s := range shown {
			if strings.Contains(s, tail) {
				t.Fatalf("the password shows in %q", s)
			}
		}
	}
}
