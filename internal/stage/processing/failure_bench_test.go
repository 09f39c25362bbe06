package processing

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/processor"
)

// BenchmarkHandleChunkFailing is one processor handling chunks of 10
// messages with a handler that fails every one of them, as it does while
// what it writes to is down, logging to a text handler that discards what
// it writes: what a failed message costs the processor, its log line (or
// its count) included, free of the scheduling noise of a whole pipeline.
// The failure lines are held back as by default.
func BenchmarkHandleChunkFailing(b *testing.B) {
	benchHandleChunkFailing(b, 0)
}

// BenchmarkHandleChunkFailingEveryLine is BenchmarkHandleChunkFailing with
// every failure logged, one line each (a negative FailureLogInterval).
func BenchmarkHandleChunkFailingEveryLine(b *testing.B) {
	benchHandleChunkFailing(b, -1)
}

func benchHandleChunkFailing(b *testing.B, every time.Duration) {
	const chunk = 10
	errDown := errors.New("database unreachable")
	opts := processor.Options[int, int]{
		Handle:      func(context.Context, *message.Message[int]) (int, error) { return 0, errDown },
		Concurrency: 1,
		MaxDemand:   chunk,
	}.WithDefaults()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := New(opts, Config[int]{Name: "bench", Logger: log, FailureLogInterval: every})
	benchChunks(b, s.newProcessor(0), chunk)
}
