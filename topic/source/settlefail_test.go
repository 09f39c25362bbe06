package source_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/boulevard-go/boulevard/internal/logburst"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/source"
)

// Guarantee: acks the topic refuses (a durable backend whose partition a
// rebalance took away first) are each counted (Stats.SettleFailed), and a
// burst of them costs one WARN line, not one a message; the source's Close
// logs one more line with the count of those it did not log.
func TestABurstOfRefusedAcksIsCountedAndLoggedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const messages = 200
		gone := errors.New("partition revoked before the message was settled")
		b := &heldBackend{settleErr: gone}
		b.releaseAll()
		h, err := topic.NewTopic[int]("gone", topic.Options{}, b)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		var lines logtest.Lines
		src, err := source.New(source.Options[int]{Topic: h, Mode: topic.Balanced("g"),
			Logger: slog.New(slog.NewTextHandler(&lines, nil))})
		if err != nil {
			t.Fatal(err)
		}
		p := downstream(t, "gone", src, 1, func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil })
		sub := b.sub(t, 0)
		for i := range messages {
			sub.in <- topic.Envelope[int]{ID: topic.MessageID(i + 1), Value: i}
		}
		synctest.Wait()
		if st := src.Stats(); st.SettleFailed != messages || st.Acked != 0 {
			t.Fatalf("stats %+v, want %d refused acks and none acked", st, messages)
		}
		if got := lines.Matching("could not settle"); len(got) != 1 || !strings.Contains(got[0], gone.Error()) {
			t.Fatalf("%d refused acks logged %q, want one line with the error", messages, got)
		}
		stop(t, p)
		if err := src.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := lines.Matching("could not settle")
		if len(got) != 2 || !strings.Contains(got[1], logburst.HeldBackKey+"=199") {
			t.Fatalf("after Close: %q, want a second line counting the 199 not logged", got)
		}
	})
}
