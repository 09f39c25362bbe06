package pipeline_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
)

// lockedBuffer is a bytes.Buffer safe for the concurrent writes of a log
// handler.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Guarantee: a pipeline whose Logger is nil logs to slog.Default(), from the
// processors and from the batchers alike; nothing is silenced.
func TestNilLoggerLogsToDefault(t *testing.T) {
	var buf lockedBuffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })

	p := mustNew(t, pipeline.Options[int, int]{
		Name: "nil-logger",
		Processors: processor.Options[int, int]{
			Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
				if m.Data == 1 {
					return 0, errors.New("processor says no")
				}
				return m.Data, nil
			},
		},
		Batchers: []batcher.Options[int]{{
			Name:      "default",
			BatchSize: 1,
			Handle: func(context.Context, []*message.Message[int], message.BatchInfo) error {
				return errors.New("batch handler says no")
			},
		}},
	})
	ctx := ctxT(t, 30*time.Second)
	if err := p.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer func() {
		if err := p.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	}()
	if _, err := p.Test(ctx, 1, 2); err != nil {
		t.Fatalf("Test: %v", err)
	}
	out := buf.String()
	for _, want := range []string{"processor says no", "batch handler says no", "pipeline=nil-logger"} {
		if !strings.Contains(out, want) {
			t.Errorf("default logger output lacks %q:\n%s", want, out)
		}
	}
}
