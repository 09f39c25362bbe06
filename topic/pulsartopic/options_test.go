package pulsartopic_test

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"

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
		{pulsartopic.Options[int]{ServiceURL: "pulsar://x:6650", Codec: topic.IntCodec{}, Partitions: 5000}, "pulsartopic.partitions", "lte"},
		{pulsartopic.Options[int]{ServiceURL: "pulsar://x:6650", Codec: topic.IntCodec{}, MaxPendingMessages: -1}, "pulsartopic.maxPendingMessages", "gte"},
		{pulsartopic.Options[int]{ServiceURL: "pulsar://x:6650", Codec: topic.IntCodec{}, Namespace: "a/b"}, "pulsartopic.namespace", "excludesall"},
		{pulsartopic.Options[int]{ServiceURL: "pulsar://x:6650", Codec: topic.IntCodec{},
			ClientOptions: pulsar.ClientOptions{URL: "pulsar://y:6650"}}, "pulsartopic.clientOptions.url", "owned"},
	}
	for _, c := range cases {
		_, err := pulsartopic.New(c.o)
		var errs validate.Errors
		if !errors.As(err, &errs) || !errs.Has(c.field, c.rule) {
			t.Errorf("New(%v) = %v, want %s %s", c.o, err, c.field, c.rule)
		}
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

// sharedClient stands for a client made elsewhere.
type sharedClient struct{ pulsar.Client }
