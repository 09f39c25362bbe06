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

// BenchmarkKeyedHeldBack is the cost of a line a Keyed holds back: what
// each record that does not decode costs a reader while a burst of them on
// one partition is counted and not logged.
func BenchmarkKeyedHeldBack(b *testing.B) {
	kd := logburst.Keyed[int32]{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Level: slog.LevelWarn, Msg: "record does not decode"}
	ctx := context.Background()
	key := []slog.Attr{slog.String("topic", "orders"), slog.Int("partition", 3)}
	err := errors.New("not an int")
	kd.Line(ctx, 3, key, slog.Int64Value(0), slog.Int64("offset", 0), slog.Any("error", err))
	b.ReportAllocs()
	var off int64
	for b.Loop() {
		off++
		kd.Line(ctx, 3, key, slog.Int64Value(off), slog.Int64("offset", off), slog.Any("error", err))
	}
}
