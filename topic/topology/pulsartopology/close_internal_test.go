package pulsartopology

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// stuckConsumer is a consumer whose Close waits for release, as
// pulsar-client-go's does for a broker that does not answer (up to the
// client's operation timeout).
type stuckConsumer struct {
	pulsar.Consumer
	release <-chan struct{}
}

func (c *stuckConsumer) Close() { <-c.release }

// Guarantee: while pulsar-client-go's Consumer.Close waits for the broker,
// a reader's Close and the backend's Close return by their context's
// deadline with an error wrapping it, the reader being closed from then
// on (ErrClosed); the closing goes on in the background, and once the
// consumer's Close returns, a later Close of the backend returns nil.
func TestCloseReturnsByItsDeadlineWhileTheConsumerCloseWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var client struct{ pulsar.Client } // the backend calls nothing on it
		b, err := New(Options[int]{Client: client, Codec: topic.IntCodec{}})
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		r := readerOn(b, &stuckConsumer{release: release}, make(chan pulsar.ConsumerMessage), "", "", "stuck")
		if !b.track(r) {
			t.Fatal("the backend refused the reader")
		}
		for _, c := range []struct {
			what    string
			closeFn func(context.Context) error
		}{{"the reader", r.Close}, {"the backend", b.Close}} {
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			ret := make(chan error, 1)
			go func() { ret <- c.closeFn(ctx) }()
			time.Sleep(time.Second)
			synctest.Wait()
			select {
			case err := <-ret:
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("closing %s while the consumer's Close waits = %v, want an error wrapping context.DeadlineExceeded", c.what, err)
				}
			default:
				close(release)
				<-ret
				cancel()
				t.Fatalf("closing %s still waits, past its deadline, for the consumer's Close", c.what)
			}
			cancel()
		}
		if _, err := r.TryReceive(t.Context(), make([]topology.Letter[int], 1)); !errors.Is(err, topology.ErrClosed) {
			t.Errorf("TryReceive on the closed reader = %v, want ErrClosed", err)
		}
		close(release)
		if err := b.Close(t.Context()); err != nil {
			t.Errorf("closing the backend again once the consumer's Close returned = %v, want nil", err)
		}
	})
}
