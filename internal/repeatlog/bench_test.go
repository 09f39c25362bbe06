package repeatlog_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/boulevard-go/boulevard/internal/repeatlog"
)

// BenchmarkFetchedWithoutARun is what each fetched record costs a
// consumer while none of its partitions fails: the check that no run
// goes on.
func BenchmarkFetchedWithoutARun(b *testing.B) {
	g := &repeatlog.Group{Prefix: "pkg", Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		g.Fetched(ctx, int32(i&7))
	}
}

// BenchmarkErrorHeldBack is what a retry's error costs once its run was
// logged and no repeat is due: counted, not logged.
func BenchmarkErrorHeldBack(b *testing.B) {
	g := &repeatlog.Group{Prefix: "pkg", Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx := context.Background()
	err := errors.New("kafka: client has run out of available brokers to talk to: EOF")
	b.ReportAllocs()
	for b.Loop() {
		g.Error(ctx, 0, err, nil, slog.String("topic", "orders"))
	}
}
