package kafkatopology

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/internal/kafkaoffset"
)

type fixedHighWater int64

func (h fixedHighWater) HighWaterMarkOffset() int64 { return int64(h) }

// Guarantee: a claim's figures show its last fetch error while it is
// younger than the quiet period, and no longer once that period has gone
// by without another (sarama does not report a fetch that returns
// nothing, so an idle partition whose fetches succeed again clears it
// that way).
func TestAClaimsFetchErrClearsOnceTheQuietPeriodPassesWithoutAnother(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const quiet = 3 * time.Second
		refused := errors.New("refused")
		c := &claim{Claim: kafkaoffset.New(nil, "t", 0), hw: fixedHighWater(5), committed: -1}
		if ps := c.stats("t", "g", quiet, 0); ps.FetchErr != nil {
			t.Fatalf("FetchErr = %v before any failure, want nil", ps.FetchErr)
		}
		c.fetchErr, c.fetchErrAt = refused, time.Now()
		time.Sleep(quiet - time.Millisecond)
		if ps := c.stats("t", "g", quiet, 0); ps.FetchErr != refused {
			t.Fatalf("FetchErr = %v just within the quiet period, want %v", ps.FetchErr, refused)
		}
		time.Sleep(time.Millisecond)
		if ps := c.stats("t", "g", quiet, 0); ps.FetchErr != nil {
			t.Fatalf("FetchErr = %v once the quiet period went by, want nil", ps.FetchErr)
		}
	})
}
