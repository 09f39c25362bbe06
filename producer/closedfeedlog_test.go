package producer_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
)

// Guarantee: messages delivered to a closed feed are logged as dropped on
// the stage's logger (the one the producer was given), not on
// slog.Default.
func TestMessagesDeliveredToAClosedFeedAreLoggedOnTheStagesLogger(t *testing.T) {
	lines := &logtest.Lines{}
	log := slog.New(slog.NewTextHandler(lines, nil))
	delivered := make(chan struct{})
	src := producer.SourceFunc[item](func(ctx context.Context, st *producer.Stage[item]) error {
		f := st.NewFeed("f", nil)
		f.Close()
		f.Deliver(message.New(item{Feed: "f"}, nil, 0))
		close(delivered)
		<-ctx.Done()
		return nil
	})
	h := start(t, "p", producer.Options[item]{Source: src}, newRecorder(), log)
	<-delivered
	h.p.StopFetching()
	waitDone(t, h)
	if got := lines.Matching("messages delivered to a closed feed are dropped unacknowledged"); len(got) != 1 {
		t.Fatalf("the stage's logger has %d lines about the dropped messages, want 1: %q", len(got), lines.All())
	}
}
