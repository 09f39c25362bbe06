package producer_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"weak"

	"github.com/boulevard-go/boulevard/producer"
)

// consumerState stands for what a source's grant callback keeps reachable:
// a partition's claim, its buffers and its fetched records.
type consumerState struct {
	granted int
	_       [1 << 10]byte // a claim's size, not a tiny allocation
}

// openAndClose registers n feeds whose grant callbacks each hold a
// consumerState, closes them, and returns weak pointers to the states.
func openAndClose(st *producer.Stage[item], round, n int) []weak.Pointer[consumerState] {
	ws := make([]weak.Pointer[consumerState], 0, n)
	feeds := make([]*producer.Feed[item], 0, n)
	for i := range n {
		cs := &consumerState{}
		feeds = append(feeds, st.NewFeed(fmt.Sprintf("t/%d-%d", i, round), func(k int) { cs.granted += k }))
		ws = append(ws, weak.Make(cs))
	}
	for _, f := range feeds {
		f.Close()
	}
	return ws
}

// Guarantee: a feed the source closed while its Run goes on (a partition
// revoked by a rebalance) is let go by the stage: after any number of
// rebalances of any number of partitions, what the closed feeds' grant
// callbacks held is garbage, and only the open feeds stay in the stage.
func TestClosedFeedsAreReleasedWhileRunGoesOn(t *testing.T) {
	const partitions, rebalances = 200, 5
	type result struct{ ws []weak.Pointer[consumerState] }
	done := make(chan result, 1)
	src := producer.SourceFunc[item](func(ctx context.Context, st *producer.Stage[item]) error {
		kept := st.NewFeed("kept", func(int) {})
		var ws []weak.Pointer[consumerState]
		for r := range rebalances {
			ws = append(ws, openAndClose(st, r, partitions)...)
		}
		done <- result{ws}
		<-ctx.Done()
		kept.Close()
		return nil
	})
	h := start(t, "rebalancing", producer.Options[item]{Source: src}, newRecorder(), nil)
	res := <-done
	runtime.GC()
	runtime.GC()
	live := 0
	for _, w := range res.ws {
		if w.Value() != nil {
			live++
		}
	}
	if live > 0 {
		t.Errorf("%d of the %d closed feeds' callback states still reachable while the run goes on", live, len(res.ws))
	}
	h.cancel()
	waitDone(t, h)
}
