package topology_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/boulevard-go/boulevard/topic/topology"
)

var errMidway = errors.New("failed midway")

// midwayDLQ fails one of the calls Replay makes: Requeue of the letters
// requeueFails picks, its DLQ reader's Settle of those settleFails picks,
// the reader's TryReceive from its call failAt on (0: never), and PinEnd
// when pinFails. Its reader hands out at most per letters a call (0: as
// many as asked) and pins its end only when pin is set.
type midwayDLQ struct {
	topology.Queues[int]
	requeueFails, settleFails func(int) bool
	per, failAt               int
	pin, pinFails             bool
}

func (q midwayDLQ) Requeue(ctx context.Context, l topology.Letter[int]) error {
	if q.requeueFails != nil && q.requeueFails(l.Value) {
		return errMidway
	}
	return q.Queues.Requeue(ctx, l)
}

func (q midwayDLQ) SubscribeDead(ctx context.Context) (topology.Reader[int], error) {
	r, err := q.Queues.SubscribeDead(ctx)
	if err != nil {
		return nil, err
	}
	mr := &midwayReader{Reader: r, q: q}
	if q.pin {
		return pinningReader{mr}, nil
	}
	return mr, nil
}

type midwayReader struct {
	topology.Reader[int]
	q     midwayDLQ
	calls int
}

func (r *midwayReader) TryReceive(ctx context.Context, dst []topology.Letter[int]) (int, error) {
	r.calls++
	if r.q.failAt > 0 && r.calls >= r.q.failAt {
		return 0, errMidway
	}
	if r.q.per > 0 {
		dst = dst[:min(len(dst), r.q.per)]
	}
	return r.Reader.TryReceive(ctx, dst)
}

func (r *midwayReader) Settle(ctx context.Context, l *topology.Letter[int]) error {
	if r.q.settleFails != nil && r.q.settleFails(l.Value) {
		return errMidway
	}
	return r.Reader.Settle(ctx, l)
}

// pinningReader is a midwayReader that pins its end through the
// in-memory DLQ reader's.
type pinningReader struct{ *midwayReader }

func (r pinningReader) PinEnd(ctx context.Context) error {
	if r.q.pinFails {
		return errMidway
	}
	return r.Reader.(topology.EndPinner).PinEnd(ctx)
}

// Guarantee: a Replay that fails midway (its Filter panicking or ending
// its goroutine, a letter's requeue refused, a replayed letter's settle
// failing, the DLQ failing to deliver, the DLQ reader failing to pin its
// end) returns an error and leaves in the DLQ every letter it has not
// replayed, those it had already decided to keep included, and none it
// replayed: a DLQ that removes a letter when it is delivered loses none.
// The letters it kept went back to the DLQ as it read them, after those
// it had not read yet, so the DLQ's order is not what is checked.
func TestAReplayThatFailsMidwayLeavesEveryLetterItDidNotReplayInTheDLQ(t *testing.T) {
	keepEven := func(l *topology.Letter[int]) bool { return l.Value%2 == 1 }
	is3 := func(v int) bool { return v == 3 }
	for _, c := range []struct {
		name            string
		q               midwayDLQ
		filter          func(l *topology.Letter[int]) bool
		replayed, inDLQ []int
	}{
		{"the Filter panics", midwayDLQ{pin: true}, func(l *topology.Letter[int]) bool {
			if l.Value == 3 {
				panic("filter broke")
			}
			return keepEven(l)
		}, []int{1}, []int{0, 2, 3, 4, 5}},
		{"the Filter ends its goroutine", midwayDLQ{pin: true}, func(l *topology.Letter[int]) bool {
			if l.Value == 3 {
				runtime.Goexit()
			}
			return keepEven(l)
		}, []int{1}, []int{0, 2, 3, 4, 5}},
		{"a requeue refused", midwayDLQ{pin: true, requeueFails: is3}, keepEven, []int{1}, []int{0, 2, 3, 4, 5}},
		{"a replayed letter's settle failing", midwayDLQ{pin: true, settleFails: is3}, keepEven, []int{1, 3}, []int{0, 2, 4, 5}},
		{"the pinned DLQ failing to deliver", midwayDLQ{pin: true, per: 2, failAt: 3}, keepEven, []int{1, 3}, []int{0, 2, 4, 5}},
		{"the unpinned DLQ failing to deliver", midwayDLQ{failAt: 2}, keepEven, nil, []int{0, 1, 2, 3, 4, 5}},
		{"the DLQ reader failing to pin its end", midwayDLQ{pin: true, pinFails: true}, keepEven, nil, []int{0, 1, 2, 3, 4, 5}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, mq := declareMemory(t, build(t, topology.New("midway").DLQ()))
				for v := range 6 {
					if err := mq.DeadLetter(t.Context(), deadOf("midway", v)); err != nil {
						t.Fatal(err)
					}
				}
				q := c.q
				q.Queues = mq
				err := errors.New("Replay ended its goroutine")
				done := make(chan struct{})
				go func() {
					defer close(done)
					_, err = topology.Replay(t.Context(), q, topology.ReplayOptions[int]{Filter: c.filter})
				}()
				<-done
				if err == nil {
					t.Error("Replay = nil, want its failure")
				}
				if got := allValues(t, mq.Subscribe); !slices.Equal(got, c.replayed) {
					t.Errorf("the group received %v, want %v", got, c.replayed)
				}
				if got := allValues(t, mq.SubscribeDead); !slices.Equal(slices.Sorted(slices.Values(got)), c.inDLQ) {
					t.Errorf("the DLQ holds %v after Replay, want %v each once", got, c.inDLQ)
				}
			})
		})
	}
}
