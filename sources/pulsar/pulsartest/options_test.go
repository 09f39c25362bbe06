package pulsartest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/validate"
)

// Invalid options are rejected before listening, naming the field and rule.
func TestOptionsValidated(t *testing.T) {
	_, err := Start(context.Background(), Options{MaxMessageSize: 10})
	if !errors.Is(err, validate.ErrInvalid) || !strings.Contains(err.Error(), "pulsartest.maxMessageSize") {
		t.Fatalf("error %v", err)
	}
	for field, o := range map[string]Options{
		"pulsartest.handshakeTimeout": {HandshakeTimeout: MaxTimeout + 1},
		"pulsartest.writeTimeout":     {WriteTimeout: MaxTimeout + 1},
	} {
		var errs validate.Errors
		if _, err := Start(context.Background(), o); !errors.As(err, &errs) || !errs.Has(field, "lte") {
			t.Errorf("Start one past the bound of %s: %v, want an lte error on it", field, err)
		}
	}
	_, err = Start(context.Background(), Options{Addr: "127.0.0.1:notaport"})
	if err == nil || errors.Is(err, validate.ErrInvalid) {
		t.Fatalf("bad address error %v", err)
	}
}

// Defaults are documented values: loopback on a free port, 5 MiB messages,
// 50 000 unacked messages per consumer, a 10 s handshake, 16 MiB queued
// for a connection and a 30 s write timeout.
func TestOptionsDefaults(t *testing.T) {
	o := Options{}.WithDefaults()
	want := Options{Addr: "127.0.0.1:0", ServerVersion: "pulsartest", MaxMessageSize: 5 << 20,
		HandshakeTimeout: 10 * time.Second, MaxUnackedPerConsumer: 50000, MaxOutgoingBytes: 16 << 20,
		WriteTimeout: 30 * time.Second}
	if o != want {
		t.Fatalf("defaults\n%+v, want\n%+v", o, want)
	}
	b := startBroker(t)
	if !strings.HasPrefix(b.URL(), "pulsar://127.0.0.1:") || strings.HasSuffix(b.URL(), ":0") {
		t.Fatalf("URL %s", b.URL())
	}
}

// Guarantee: an Addr without a host listens on the loopback interface
// only, not on every interface as net.Listen would.
func TestAddrWithoutAHostListensOnLoopbackOnly(t *testing.T) {
	b, err := Start(t.Context(), Options{Addr: ":0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	if a, ok := b.Addr().(*net.TCPAddr); !ok || !a.IP.IsLoopback() {
		t.Fatalf("Addr \":0\" listens on %v, want the loopback interface", b.Addr())
	}
}

// Topic names are completed like Pulsar does, and partition names parsed.
func TestTopicNames(t *testing.T) {
	cases := map[string]string{
		"x":                             "persistent://public/default/x",
		"t/ns/x":                        "persistent://t/ns/x",
		"persistent://t/ns/x":           "persistent://t/ns/x",
		"non-persistent://public/dev/y": "non-persistent://public/dev/y",
	}
	for in, want := range cases {
		if got := FullTopicName(in); got != want {
			t.Errorf("FullTopicName(%q) = %q, want %q", in, got, want)
		}
	}
	if got := PartitionTopic("x", 3); got != "persistent://public/default/x-partition-3" {
		t.Errorf("PartitionTopic = %q", got)
	}
	tn, err := parseTopic("persistent://public/default/x-partition-3")
	if err != nil || tn.partition != 3 || tn.base != "persistent://public/default/x" {
		t.Errorf("parse partition: %+v %v", tn, err)
	}
	for _, bad := range []string{"a/b", "ftp://a/b/c", "persistent://a/b", "a//b"} {
		if _, err := parseTopic(bad); !errors.Is(err, ErrInvalidTopic) {
			t.Errorf("parseTopic(%q) error %v", bad, err)
		}
	}
}

// The test API's Publish and Messages round-trip every field, batched and
// unbatched, and partitioned topics route keyed messages by key hash.
func TestPublishAndMessagesRoundTrip(t *testing.T) {
	b := startBroker(t)
	ctx := ctxT(t)
	in := Message{
		Key: "k", OrderingKey: "ok", Payload: []byte("p"), Properties: map[string]string{"a": "1"},
		EventTime: time.UnixMilli(1_700_000_000_000), ProducerName: "me", PublishTime: time.UnixMilli(1_700_000_000_500),
	}
	for _, batch := range []bool{false, true} {
		topic := fmt.Sprint("rt-", batch)
		var ids []MessageID
		var err error
		if batch {
			ids, err = b.PublishBatch(ctx, topic, in, in)
		} else {
			ids, err = b.Publish(ctx, topic, in, in)
		}
		if err != nil {
			t.Fatal(err)
		}
		out := b.Messages(topic)
		if len(out) != 2 {
			t.Fatalf("%d messages", len(out))
		}
		for i, m := range out {
			if m.ID != ids[i] {
				t.Errorf("id %+v, Publish returned %+v", m.ID, ids[i])
			}
			m.ID = MessageID{}
			if !reflect.DeepEqual(m, in) {
				t.Errorf("batch=%v: got %+v, want %+v", batch, m, in)
			}
		}
	}
	if err := b.CreateTopic("rt-part", 4); err != nil {
		t.Fatal(err)
	}
	ids, err := b.Publish(ctx, "rt-part", Message{Key: "same"}, Message{Key: "same"}, Message{Key: "other"})
	if err != nil {
		t.Fatal(err)
	}
	if ids[0].Partition != ids[1].Partition || ids[0].Partition < 0 {
		t.Fatalf("same key on partitions %d and %d", ids[0].Partition, ids[1].Partition)
	}
	if len(b.Messages(PartitionTopic("rt-part", int(ids[0].Partition)))) < 2 {
		t.Fatal("partition messages missing")
	}
}

// Guarantee: each bound of the broker's sizes and timeouts is itself
// accepted, and the value just past it is refused with an error naming
// the field and the rule.
func TestOptionsAreAcceptedAtTheirBoundsAndRefusedPastThem(t *testing.T) {
	size := func(set func(*Options, int)) func(*Options, int64) {
		return func(o *Options, v int64) { set(o, int(v)) }
	}
	wait := func(set func(*Options, time.Duration)) func(*Options, int64) {
		return func(o *Options, v int64) { set(o, time.Duration(v)) }
	}
	setMessageSize := size(func(o *Options, n int) { o.MaxMessageSize = n })
	setOutgoing := size(func(o *Options, n int) { o.MaxOutgoingBytes = n })
	setHandshake := wait(func(o *Options, d time.Duration) { o.HandshakeTimeout = d })
	setWrite := wait(func(o *Options, d time.Duration) { o.WriteTimeout = d })
	for _, c := range []struct {
		field, rule string
		set         func(*Options, int64)
		bound, past int64
	}{
		{"pulsartest.maxMessageSize", "gte", setMessageSize, 1 << 10, 1<<10 - 1},
		{"pulsartest.maxMessageSize", "lte", setMessageSize, maxMessageSize, maxMessageSize + 1},
		{"pulsartest.maxOutgoingBytes", "gte", setOutgoing, 64 << 10, 64<<10 - 1},
		{"pulsartest.maxOutgoingBytes", "lte", setOutgoing, 256 << 20, 256<<20 + 1},
		{"pulsartest.handshakeTimeout", "gte", setHandshake, int64(time.Millisecond), int64(time.Millisecond - 1)},
		{"pulsartest.handshakeTimeout", "lte", setHandshake, int64(MaxTimeout), int64(MaxTimeout + 1)},
		{"pulsartest.writeTimeout", "gte", setWrite, int64(time.Millisecond), int64(time.Millisecond - 1)},
		{"pulsartest.writeTimeout", "lte", setWrite, int64(MaxTimeout), int64(MaxTimeout + 1)},
	} {
		var at, past Options
		c.set(&at, c.bound)
		c.set(&past, c.past)
		if err := at.WithDefaults().Validate(); err != nil {
			t.Errorf("%s at its bound %d refused: %v", c.field, c.bound, err)
		}
		var errs validate.Errors
		if err := past.WithDefaults().Validate(); !errors.As(err, &errs) || len(errs) != 1 || !errs.Has(c.field, c.rule) {
			t.Errorf("%s %d: Validate = %v, want one %s error on %s", c.field, c.past, err, c.rule, c.field)
		}
	}
}
