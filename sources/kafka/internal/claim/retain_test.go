package claim

import (
	"runtime"
	"testing"
	"testing/synctest"
	"weak"

	"github.com/boulevard-go/boulevard/internal/wait"
)

// watchedRecords are n records from offset 0, each with a key and a value
// of their own, and weak pointers to those keys and values.
func watchedRecords(n int) ([]Record, []weak.Pointer[byte]) {
	recs := make([]Record, n)
	ws := make([]weak.Pointer[byte], 0, 2*n)
	for i := range recs {
		recs[i] = Record{Offset: int64(i), Key: make([]byte, 16), Value: make([]byte, 256)}
		ws = append(ws, weak.Make(&recs[i].Key[0]), weak.Make(&recs[i].Value[0]))
	}
	return recs, ws
}

func recordOf(r Record) Record { return r }

func noHeaders(dst []Header, _ Record) []Header { return dst }

// Guarantee: the claim keeps neither the key nor the value of a record it
// withdrew from the stage buffer (a revoke or a rewind): only the records
// that had left the buffer stay reachable, held by the pipeline, and once
// they are handled nothing is.
func TestWithdrawnRecordsKeysAndValuesAreNotKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, stage, unhold := heldClaim(t)
		n := int(c.Permits())
		recs, ws := watchedRecords(n)
		if got := c.Take(n); got != n {
			t.Fatalf("the claim holds %d permits, want %d", got, n)
		}
		Deliver(c, recs, recordOf, noHeaders)
		recs = nil
		buffered := withdrawSome(t, c, stage, n)
		if live, most := wait.Reachable(ws), 2*(n-buffered); live > most {
			t.Errorf("%d keys and values of %d records still reachable after %d were withdrawn, want at most the %d of those that left the stage buffer", live, n, buffered, most)
		}
		unhold()
		synctest.Wait()
		if live := wait.Reachable(ws); live > 0 {
			t.Errorf("%d keys and values of %d records still reachable once every record left was handled", live, n)
		}
		runtime.KeepAlive(c)
	})
}

// Guarantee: records a claim delivers to a feed that has closed are not
// kept: the claim keeps neither their keys nor their values.
func TestRecordsRefusedByAClosedFeedAreNotKept(t *testing.T) {
	c := closedClaim(t, "closed-feed-retain")
	recs, ws := watchedRecords(8)
	Deliver(c, recs, recordOf, noHeaders)
	recs = nil
	if live := wait.Reachable(ws); live > 0 {
		t.Errorf("%d of %d keys and values delivered to a closed feed still reachable", live, len(ws))
	}
	runtime.KeepAlive(c)
}
