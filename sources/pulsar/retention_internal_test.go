package pulsar

import (
	"context"
	"log/slog"
	"runtime"
	"testing"
	"weak"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/wait"
)

// payloadMessage is a pulsar.Message with a payload and no id.
type payloadMessage struct {
	heldMessage
	payload []byte
}

func (m payloadMessage) Payload() []byte { return m.payload }

// Guarantee: outcomes that come after their consumer closed (or was
// replaced), or while its ack queue stops, are dropped without their
// messages being kept: the consumer keeps no payload of them, acked,
// nacked or discarded.
func TestOutcomesAfterTheConsumerClosedKeepNoPayload(t *testing.T) {
	for _, tc := range []struct {
		name  string
		close func(c *consumer)
	}{
		{"closed", func(c *consumer) { c.gone.Store(true) }},
		{"ack queue stopping", func(c *consumer) {
			c.acks.mu.Lock()
			c.acks.closing = true
			c.acks.mu.Unlock()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &consumer{src: &Source{}, name: "gone", log: slog.New(slog.DiscardHandler), acks: newAckQueue()}
			tc.close(c)
			var ws []weak.Pointer[byte]
			outcome := func(d acker.Disposition) acker.Outcome {
				p := make([]byte, 1<<10)
				ws = append(ws, weak.Make(&p[0]))
				return acker.Outcome{Data: pulsar.Message(payloadMessage{payload: p}), Disposition: d}
			}
			c.Ack(context.Background(), []acker.Outcome{outcome(acker.DispositionDefault)},
				[]acker.Outcome{outcome(acker.DispositionRetry), outcome(acker.DispositionDiscard)})
			if n := c.src.droppedAcks.Load(); n != 3 {
				t.Fatalf("DroppedAcks = %d, want the 3 outcomes", n)
			}
			if live := wait.Reachable(ws); live > 0 {
				t.Errorf("%d of %d payloads of outcomes for a closed consumer still reachable", live, len(ws))
			}
			runtime.KeepAlive(c)
		})
	}
}
