package pipeline_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
)

// Guarantee: a message that a handler or a batch handler fails with a nil
// error (message.Fail(nil)) while returning no error itself reaches its
// acknowledger once, as a failure with message.ErrFailed, with or without
// batchers.
func TestAMessageFailedWithoutAnErrorReachesItsAcknowledgerAsFailed(t *testing.T) {
	handle := func(_ context.Context, m *message.Message[int]) (int, error) {
		if m.Data == 1 {
			m.Fail(nil)
		}
		return m.Data, nil
	}
	batch := func(_ context.Context, msgs []*message.Message[int], _ message.BatchInfo) error {
		for _, m := range msgs {
			if m.Data == 2 {
				m.Fail(nil)
			}
		}
		return nil
	}
	for _, withBatchers := range []bool{false, true} {
		name := "processors"
		if withBatchers {
			name = "batchers"
		}
		t.Run(name, func(t *testing.T) {
			o := pipeline.Options[int, int]{
				Name:       "fail-nil",
				Processors: processor.Options[int, int]{Handle: handle},
			}
			if withBatchers {
				o.Batchers = []batcher.Options[int]{{Name: "default", BatchSize: 10, BatchTimeout: time.Hour, Handle: batch}}
			}
			p := mustNew(t, o)
			startPipeline(t, p)
			res, err := p.Test(ctxT(t, 10*time.Second), 0, 1, 2)
			if err != nil {
				t.Fatalf("Test: %v", err)
			}
			for i, r := range res {
				failed := i == 1 || (withBatchers && i == 2)
				if r.Acks != 1 || failed != errors.Is(r.Err, message.ErrFailed) || (!failed && r.Err != nil) {
					t.Errorf("message %d: %+v, want acknowledged once, failed with ErrFailed: %v", i, r, failed)
				}
			}
		})
	}
}
