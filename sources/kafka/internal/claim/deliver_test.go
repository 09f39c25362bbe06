package claim

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// testRecord is a record as a client hands it to Deliver.
type testRecord struct {
	off     int64
	key     string
	headers []string
	ts      time.Time
}

func testRecordOf(r testRecord) Record {
	rec := Record{Offset: r.off, Value: []byte("v"), Timestamp: r.ts, Headers: len(r.headers)}
	if r.key != "" {
		rec.Key = []byte(r.key)
	}
	return rec
}

func testHeaders(dst []Header, r testRecord) []Header {
	for _, h := range r.headers {
		dst = append(dst, Header{Key: []byte(h)})
	}
	return dst
}

// seenRecord is what a handler saw of a record's Metadata.
type seenRecord struct {
	offset  int64
	key     []byte
	headers []string
	ts      time.Time
}

// startClaim runs a pipeline whose source opens c, with one processor
// taking one message at a time, which handle handles. It returns the
// pipeline's producer stage; the pipeline stops with the test. It runs in
// a synctest bubble.
func startClaim(t *testing.T, c *Claim, handle func(m *message.Message[[]byte])) *producer.Stage[[]byte] {
	opened := make(chan *producer.Stage[[]byte], 1)
	src := producer.SourceFunc[[]byte](func(ctx context.Context, stage *producer.Stage[[]byte]) error {
		c.Open(stage)
		opened <- stage
		<-ctx.Done()
		return nil
	})
	p, err := pipeline.New(pipeline.Options[[]byte, []byte]{
		Name:     "claim-deliver",
		Logger:   discard,
		Producer: producer.Options[[]byte]{Source: src},
		Processors: processor.Options[[]byte, []byte]{
			Concurrency:   1,
			MaxDemand:     1,
			QueueCapacity: 1, // a delivery waits in the stage buffer while the processor is busy
			Handle: func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
				handle(m)
				return m.Data, nil
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return <-opened
}

// deliverTaken takes a permit per record of recs, failing the test when
// the claim holds fewer, and delivers them.
func deliverTaken(t *testing.T, c *Claim, recs ...testRecord) {
	t.Helper()
	synctest.Wait()
	if got := c.Take(len(recs)); got != len(recs) {
		t.Fatalf("the claim holds %d permits, want %d", got, len(recs))
	}
	Deliver(c, recs, testRecordOf, testHeaders)
}

// runClaim starts c (startClaim) with a handler that records what it sees
// of each message's Metadata (by offset), then appends a header of its own
// to it, as a handler may. It returns deliver, which delivers recs to c
// and waits for their outcomes, and the records seen.
func runClaim(t *testing.T, c *Claim) (deliver func(recs ...testRecord), seen func(off int64) seenRecord) {
	var mu sync.Mutex
	saw := map[int64]seenRecord{}
	startClaim(t, c, func(m *message.Message[[]byte]) {
		md, ok := message.MetadataAs[*Metadata](m)
		if !ok {
			t.Error("a delivered message carries no *Metadata")
			return
		}
		r := seenRecord{offset: md.Offset, key: md.Key, ts: md.Timestamp}
		for _, h := range md.Headers {
			r.headers = append(r.headers, string(h.Key))
		}
		_, id, _ := m.Acknowledger()
		mu.Lock()
		saw[int64(id)] = r
		mu.Unlock()
		md.Headers = append(md.Headers, Header{Key: []byte("added by the handler")})
	})
	deliver = func(recs ...testRecord) {
		t.Helper()
		deliverTaken(t, c, recs...)
		synctest.Wait()
		if n := c.Pending(); n != 0 {
			t.Fatalf("%d records wait for their outcome after the pipeline went idle", n)
		}
	}
	seen = func(off int64) seenRecord {
		mu.Lock()
		defer mu.Unlock()
		r, ok := saw[off]
		if !ok {
			t.Fatalf("offset %d was not handled", off)
		}
		return r
	}
	return deliver, seen
}

// Guarantee: each delivered message carries its own record's offset,
// key, headers and timestamp, and nothing of the record its slot carried
// before, nor of the record delivered beside it (a handler appending to
// one message's headers does not write into the next one's); and the
// commit follows every record delivered.
func TestDeliveredMetadataIsTheRecordsOwn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(Config{Topic: "t", Window: 1, Committed: -1, Start: 0})
		deliver, seen := runClaim(t, c)
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		// Slots are reused once their message's outcome is in: enough
		// rounds of one record that a later one reuses an earlier's slot.
		deliver(testRecord{off: 0, key: "k0", headers: []string{"h0"}, ts: t0},
			testRecord{off: 1, key: "k1", headers: []string{"h1"}, ts: t0.Add(1)})
		for off := int64(2); off < 6; off++ {
			r := testRecord{off: off, ts: t0.Add(time.Duration(off))}
			if off%2 == 0 {
				r.key, r.headers = "k", []string{"h"}
			}
			deliver(r)
		}
		for off := int64(0); off < 6; off++ {
			r := seen(off)
			var wantKey []byte
			var wantHeaders []string
			switch {
			case off < 2:
				wantKey, wantHeaders = []byte{'k', byte('0' + off)}, []string{string([]byte{'h', byte('0' + off)})}
			case off%2 == 0:
				wantKey, wantHeaders = []byte("k"), []string{"h"}
			}
			if r.offset != off || string(r.key) != string(wantKey) || (r.key == nil) != (wantKey == nil) ||
				!slices.Equal(r.headers, wantHeaders) || !r.ts.Equal(t0.Add(time.Duration(off))) {
				t.Errorf("offset %d carried offset %d, key %q, headers %q, timestamp %v; want its own: key %q, headers %q, timestamp %v",
					off, r.offset, r.key, r.headers, r.ts, wantKey, wantHeaders, t0.Add(time.Duration(off)))
			}
		}
		if got := c.Marked.Load(); got != 6 {
			t.Fatalf("Marked = %d once offsets 0-5 were handled, want 6", got)
		}
	})
}

// Guarantee: when the client reads from below where the claim was told it
// starts (the committed offset was past the end of a truncated log, and
// the client reset), the records it reads are tracked and the commit
// follows them.
func TestCommitFollowsRecordsReadFromBelowTheStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(Config{Topic: "t", Window: 4, Committed: 100, Start: 100})
		deliver, _ := runClaim(t, c)
		deliver(testRecord{off: 5}, testRecord{off: 6})
		if got := c.Marked.Load(); got != 7 {
			t.Fatalf("Marked = %d once offsets 5 and 6 were handled, want 7", got)
		}
	})
}

// Guarantee: Withdraw takes back exactly the claim's records still in the
// stage buffer, returns their permits to the claim, and stops waiting for
// them: the claim then waits only for the records that left the buffer,
// and its commit follows them once they are handled.
func TestWithdrawForgetsBufferedRecordsAndReturnsTheirPermits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, stage, unhold := heldClaim(t)
		n := int(c.Permits())
		recs := make([]testRecord, n)
		for i := range recs {
			recs[i].off = int64(i)
		}
		deliverTaken(t, c, recs...)
		buffered := withdrawSome(t, c, stage, n)
		if got := c.Permits(); got != int64(buffered) {
			t.Fatalf("the claim holds %d permits after the withdrawal, want the %d withdrawn records'", got, buffered)
		}
		if got := c.Pending(); got != n-buffered {
			t.Fatalf("the claim waits for %d records, want the %d that left the stage buffer", got, n-buffered)
		}
		unhold()
		synctest.Wait()
		if got := c.Marked.Load(); got != int64(n-buffered) {
			t.Fatalf("Marked = %d once the records that left the buffer were handled, want %d", got, n-buffered)
		}
	})
}

// heldClaim starts a claim with a window of 8 from offset 0
// (startClaim) whose handler holds each message until unhold is called
// (at the latest when the test ends, before the pipeline stops), and
// waits until the claim holds its permits. It runs in a synctest bubble.
func heldClaim(t *testing.T) (c *Claim, stage *producer.Stage[[]byte], unhold func()) {
	c = New(Config{Topic: "t", Window: 8, Committed: -1, Start: 0})
	hold := make(chan struct{})
	stage = startClaim(t, c, func(*message.Message[[]byte]) { <-hold })
	unhold = sync.OnceFunc(func() { close(hold) })
	t.Cleanup(unhold)
	synctest.Wait()
	return c, stage, unhold
}

// withdrawSome waits until the n records delivered to c are taken or
// buffered, checks that some but not all wait in the stage buffer, and
// withdraws them, failing the test unless Withdraw takes back exactly
// those. It reports how many it withdrew.
func withdrawSome(t *testing.T, c *Claim, stage *producer.Stage[[]byte], n int) int {
	t.Helper()
	synctest.Wait()
	buffered := stage.Buffered()
	if buffered == 0 || buffered == n {
		t.Fatalf("test setup: %d of %d records in the stage buffer, want some but not all", buffered, n)
	}
	if got := c.Withdraw(); got != buffered {
		t.Fatalf("Withdraw took back %d records, want the %d in the stage buffer", got, buffered)
	}
	return buffered
}
