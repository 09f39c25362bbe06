package pulsar

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/wait"
)

// slowClosingConsumer is a pulsar.Consumer whose Close waits until the
// test releases it, as a client's does while the broker withholds the
// answer to its close request.
type slowClosingConsumer struct {
	pulsar.Consumer // the methods the source does not call

	release chan struct{}
}

func (s slowClosingConsumer) Close() { <-s.release }

// Guarantee: every Close of a source called together waits for the close
// of its consumers, which one of them began: none returns while the
// client's close of a consumer has not returned, and each returns nil
// once it has.
func TestClosesCalledTogetherAllWaitForTheConsumersClose(t *testing.T) {
	const rounds, closers = 2000, 4
	for round := range rounds {
		synctest.Test(t, func(t *testing.T) {
			release := make(chan struct{})
			src := &Source{live: make(map[*consumer]struct{})}
			c := &consumer{
				src:  src,
				name: "slow",
				c:    slowClosingConsumer{release: release},
				log:  slog.New(slog.DiscardHandler),
				wake: make(chan struct{}, 1),
				acks: newAckQueue(),
			}
			go c.sendAcks()
			src.live[c] = struct{}{}

			errs := wait.Together(closers, func() error { return src.Close(context.Background()) })
			synctest.Wait()
			select {
			case err := <-errs:
				close(release)
				t.Fatalf("round %d: a Close called with others returned (%v) while the client's close of the consumer had not", round, err)
			default:
			}
			close(release)
			for range closers {
				if err := <-errs; err != nil {
					t.Fatalf("round %d: Close = %v, want nil", round, err)
				}
			}
		})
	}
}
