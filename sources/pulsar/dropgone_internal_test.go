package pulsar

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
)

// Guarantee: the one line for the outcomes dropped for a closed or
// replaced consumer is logged by the first call that brings some: a call
// that brings only failures the shutdown caused (neither acked nor
// nacked) does not use it up.
func TestDroppedOutcomesLineWaitsForACallThatDropsSome(t *testing.T) {
	var logs syncBuffer
	c := &consumer{src: &Source{}, name: "gone", log: slog.New(slog.NewTextHandler(&logs, nil)), acks: newAckQueue()}
	c.gone.Store(true)
	ctx := context.Background()
	c.Ack(ctx, nil, []acker.Outcome{{Data: heldMessage{}, Err: &acker.ShutdownError{Err: context.Canceled}}})
	c.Ack(ctx, []acker.Outcome{{Data: heldMessage{}}, {Data: heldMessage{}}}, nil)
	logs.mu.Lock()
	out := logs.b.String()
	logs.mu.Unlock()
	if n := strings.Count(out, "dropped"); n != 1 || !strings.Contains(out, "outcomes=2") {
		t.Errorf("want one line for the 2 dropped outcomes, got:\n%s", out)
	}
	if n := c.src.droppedAcks.Load(); n != 2 {
		t.Errorf("DroppedAcks = %d, want 2", n)
	}
}
