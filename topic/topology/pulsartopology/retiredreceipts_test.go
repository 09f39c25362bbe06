package pulsartopology_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/pulsartopology"
)

// Guarantee: on the Pulsar backend, a send that ends its deadline without
// a receipt retires the topic's producer without failing the other sends
// still waiting on it: against a broker whose receipts come late (after
// the client's operation timeout, within the sends' own deadlines), each
// of them returns nil once its receipt comes, and its letter is stored
// once, with no cause for the caller to send it again.
func TestSendsWaitingOnARetiredProducerGetTheirReceipts(t *testing.T) {
	br := testbroker.Pulsar(t)
	o := options(br, topic.Codec[int](topic.IntCodec{}))
	o.OperationTimeout = 15 * time.Second
	// A close request the broker does not answer gives up after this.
	o.ClientOptions.OperationTimeout = time.Second
	be := newBackend(t, o)
	q, err := be.Declare(ctxT(t), build(t, topology.New("retired-receipts")))
	if err != nil {
		t.Fatal(err)
	}
	main := be.TopicName("retired-receipts")

	release := br.Withhold(pulsartest.CommandSend)
	t.Cleanup(release)
	waiting := []int{1, 2, 3}
	sent := make(chan sendResult, len(waiting))
	for _, v := range waiting {
		go func() {
			sent <- sendResult{v, q.Publish(context.Background(), topology.Letter[int]{Value: v})}
		}()
	}
	wait.Within(t, faultPatience, "the sends withheld", func() bool { return br.Stats().Withheld > 0 })

	// A send with a short deadline ends it without a receipt, retiring
	// the producer the others wait on.
	const short = 9
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	err = q.Publish(ctx, topology.Letter[int]{Value: short})
	cancel()
	if !errors.Is(err, pulsartopology.ErrSend) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Publish with a short deadline while the broker withholds receipts = %v, want ErrSend and context.DeadlineExceeded", err)
	}
	// The slow broker stores the messages and sends their receipts three
	// client operation timeouts later.
	answered := make(chan struct{})
	slow := time.AfterFunc(3*o.ClientOptions.OperationTimeout, func() {
		release()
		close(answered)
	})
	t.Cleanup(func() { slow.Stop() })

	var failed []int
	for range waiting {
		if r := <-sent; r.err != nil {
			t.Errorf("Publish(%d), waiting on the retired producer for its late receipt = %v, want nil", r.v, r.err)
			failed = append(failed, r.v)
		}
	}
	<-answered
	for _, v := range failed {
		// Kept, the letter is sent again, as a source hands off a letter
		// whose hand-off failed.
		if err := q.Publish(ctxT(t), topology.Letter[int]{Value: v}); err != nil {
			t.Fatalf("Publish(%d) again: %v", v, err)
		}
	}
	stored := func() map[int]int {
		n := map[int]int{}
		for _, m := range br.Messages(main) {
			if v, err := decodeInt(m.Payload); err == nil {
				n[v]++
			}
		}
		return n
	}
	wait.Within(t, faultPatience, "every letter stored", func() bool {
		n := stored()
		return n[1] > 0 && n[2] > 0 && n[3] > 0 && n[short] > 0
	}, func() string { return fmt.Sprintf("stored %v", stored()) })
	n := stored()
	for _, v := range waiting {
		if n[v] != 1 {
			t.Errorf("letter %d stored %d times, want once", v, n[v])
		}
	}
}

type sendResult struct {
	v   int
	err error
}
