package kafkatopology

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/boulevard-go/boulevard/internal/redact/redacttest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: the options and a backend made with SASL credentials print
// none of them, with any fmt verb (%s and %d included: they would reach
// the sarama configuration), encoded as JSON or logged; they say the
// credentials were left out.
func TestOptionsAndBackendPrintNoCredentials(t *testing.T) {
	const user, password = "alice", "pw-51c2d7-secret"
	c := testbroker.Kafka(t, kfake.EnableSASL(), kfake.Superuser(sarama.SASLTypePlaintext, user, password))
	cfg := testbroker.SaramaConfig()
	cfg.Net.SASL.Enable = true
	cfg.Net.SASL.Mechanism = sarama.SASLTypePlaintext
	cfg.Net.SASL.User, cfg.Net.SASL.Password = user, password
	o := Options[topologytest.Msg]{
		Brokers: c.ListenAddrs(), Config: cfg, Codec: topic.JSONCodec[topologytest.Msg]{},
		AdminTimeout: 30 * time.Second, Logger: slog.New(slog.DiscardHandler),
	}
	redacttest.NoSecret(t, "the options", o, password)
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { topologytest.MustClose(t, "the backend", b.Close) })
	redacttest.NoSecret(t, "the backend", b, password)
	for what, v := range map[string]any{"options": o, "backend": b} {
		if s := fmt.Sprintf("%s", v); !strings.Contains(s, "credentials:redacted") {
			t.Errorf("the %s print as %s, want credentials:redacted", what, s)
		}
	}
}
