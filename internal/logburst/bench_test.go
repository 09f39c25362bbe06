package logburst_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/boulevard-go/boulevard/internal/logburst"
)

// BenchmarkLogHeldBack is the cost of a line a Limiter holds back, from
// every processor of the machine at once: what each failed message costs
// while a burst of failures is counted and not logged.
func BenchmarkLogHeldBack(b *testing.B) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var l logburst.Limiter
	ctx := context.Background()
	err := errors.New("database unreachable")
	l.Log(ctx, log, slog.LevelWarn, "message failed", slog.Any("error", err))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l.Log(ctx, log, slog.LevelWarn, "message failed", slog.Any("error", err))
		}
	})
}
