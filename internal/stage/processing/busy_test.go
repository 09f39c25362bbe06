package processing_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/processor"
)

// Guarantee: the processors' Busy never exceeds the time they ran, however
// few chunks they handled and whenever it is read: a processor that times
// one chunk in 64 counts each untimed chunk after it as long as the timed
// one, but never more than the time that passed. With every moment spent
// in a chunk, Busy is that time exactly once the processor has stopped.
func TestBusyNeverExceedsTheTimeTheProcessorsRan(t *testing.T) {
	for _, chunks := range []int{5, 71} {
		t.Run(fmt.Sprintf("chunks=%d", chunks), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := acker.NewRecorder(false)
				// The first chunk, timed, takes 10ms; the others 1ms.
				s := newStage(t, processor.Options[int, int]{Concurrency: 1,
					Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
						if m.Data == 0 {
							time.Sleep(10 * time.Millisecond)
						} else {
							time.Sleep(time.Millisecond)
						}
						return m.Data, nil
					}})
				began := time.Now()
				run(t, s)
				for i := range chunks {
					// One message at a time: a chunk each.
					publish(t, s, ints(rec, i, 1))
					waitAcks(t, rec, i+1)
					ran := time.Since(began)
					if busy := s.Stats(ran).Busy; busy > ran {
						t.Fatalf("busy %v after %d chunks in %v", busy, i+1, ran)
					}
				}
				drain(t, s)
				ran := time.Since(began)
				if want := time.Duration(chunks+9) * time.Millisecond; ran != want {
					t.Fatalf("%d chunks took %v, want %v", chunks, ran, want)
				}
				if busy := s.Stats(ran).Busy; busy != ran {
					t.Errorf("busy %v after %d chunks that took all of %v", busy, chunks, ran)
				}
			})
		})
	}
}
