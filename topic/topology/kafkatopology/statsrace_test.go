package kafkatopology

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: the backend's Stats may be read from several goroutines
// while group readers subscribe, receive, settle and close, while a
// releaser claims its hold partition and releases a letter, and while the
// backend closes (run with -race); once the backend closed, they list no
// partition, of the main topic or of a hold.
func TestStatsMayBeReadWhileReadersComeAndGoAndTheBackendCloses(t *testing.T) {
	const readers, pollers = 2, 2
	c := testbroker.Kafka(t)
	b := newBackend(t, c.ListenAddrs(), func(o *Options[msg]) { o.Partitions = 2 })
	q := declare(t, b, topology.New("stats-race").Hold(time.Second))
	for n := range 2 * readers {
		if err := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: n}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Hold(t.Context(), 0, topology.Letter[msg]{Value: msg{N: -1}}); err != nil {
		t.Fatal(err)
	}

	done := make(chan struct{})
	var polling sync.WaitGroup
	for range pollers {
		polling.Go(func() {
			for {
				st := b.Stats()
				for _, ps := range st.Partitions {
					if ps.Lag < 0 || ps.FetchLag < 0 {
						panic(fmt.Sprintf("Stats list a partition with a negative lag: %+v", ps))
					}
				}
				for _, h := range st.Holds {
					if h.Waiting < 0 {
						panic(fmt.Sprintf("Stats list a hold partition with negative letters waiting: %+v", h))
					}
				}
				select {
				case <-done:
					return
				default:
				}
			}
		})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var reading sync.WaitGroup
	errs := make(chan error, readers)
	for range readers {
		reading.Go(func() {
			if err := readOneAndClose(ctx, q); err != nil {
				errs <- err
			}
		})
	}
	reading.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	wait.For(t, "the held letter released", func() bool {
		return slices.ContainsFunc(b.Stats().Holds, func(h HoldStats) bool { return h.Committed == 1 && h.Waiting == 0 })
	}, holdsState(b))
	if err := b.Close(t.Context()); err != nil {
		t.Errorf("Close = %v", err)
	}
	close(done)
	polling.Wait()
	if st := b.Stats(); len(st.Partitions) != 0 || len(st.Holds) != 0 {
		t.Errorf("Stats() once the backend closed lists partitions %+v and holds %+v, want none", st.Partitions, st.Holds)
	}
}

// readOneAndClose subscribes a reader to q, receives a letter, settles it
// and closes the reader.
func readOneAndClose(ctx context.Context, q topology.Queues[msg]) error {
	r, err := q.Subscribe(ctx)
	if err != nil {
		return fmt.Errorf("Subscribe: %w", err)
	}
	buf := make([]topology.Letter[msg], 1)
	if _, err = r.Receive(ctx, buf); err == nil {
		err = r.Settle(ctx, &buf[0])
	}
	if cerr := r.Close(ctx); err == nil {
		err = cerr
	}
	return err
}
