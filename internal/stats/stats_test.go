package stats

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Guarantee: a recorder puts each observation in the first bucket whose
// bound is at least the value (bounds inclusive, the last bucket above
// every bound), and sums them in the histogram's unit.
func TestRecorderBucketsAndSums(t *testing.T) {
	r := NewLatency()
	for _, d := range []time.Duration{0, 10 * time.Microsecond, 11 * time.Microsecond, time.Second, time.Minute} {
		r.ObserveDuration(d)
	}
	var h Histogram
	r.AddTo(&h)
	want := map[int]uint64{0: 2, 1: 1, 9: 1, len(LatencyBounds): 1}
	for i, c := range h.Counts {
		if c != want[i] {
			t.Errorf("bucket %d (bound %v): %d, want %d", i, append(LatencyBounds, 0)[i], c, want[i])
		}
	}
	if h.Count != 5 || h.Sum < 61.0000209 || h.Sum > 61.0000211 {
		t.Errorf("count %d sum %v, want 5 and 61.000021", h.Count, h.Sum)
	}
	s := NewSize()
	s.ObserveSize(3)
	var hs Histogram
	s.AddTo(&hs)
	if hs.Counts[2] != 1 || hs.Sum != 3 {
		t.Errorf("size 3: counts %v sum %v, want bucket 2 (bound 5) and sum 3", hs.Counts, hs.Sum)
	}
}

// Guarantee: Quantile interpolates inside the bucket the rank falls in, as
// Prometheus's histogram_quantile does, and reports 0 without observations.
func TestQuantileInterpolatesInsideTheBucket(t *testing.T) {
	h := Histogram{Bounds: []float64{1, 2, 4}, Counts: []uint64{0, 10, 10, 0}, Count: 20}
	for _, c := range []struct{ q, want float64 }{{0.25, 1.5}, {0.5, 2}, {0.75, 3}, {1, 4}} {
		if got := h.Quantile(c.q); got != c.want {
			t.Errorf("Quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := (Histogram{Bounds: []float64{1}, Counts: []uint64{0, 0}}).Quantile(0.5); got != 0 {
		t.Errorf("empty histogram: %v, want 0", got)
	}
	if got := (Histogram{Bounds: []float64{1}, Counts: []uint64{0, 3}, Count: 3}).Quantile(0.5); got != 1 {
		t.Errorf("all above the bounds: %v, want the highest bound 1", got)
	}
}

// Guarantee: Ratio is busy ÷ (workers × wall), clamped to [0, 1] (a
// negative busy time is 0), and 0 without wall time or workers.
func TestRatio(t *testing.T) {
	for _, c := range []struct {
		busy    time.Duration
		workers int
		wall    time.Duration
		want    float64
	}{{time.Second, 2, time.Second, 0.5}, {3 * time.Second, 2, time.Second, 1}, {time.Second, 0, time.Second, 0}, {time.Second, 1, 0, 0}, {-time.Second, 1, time.Second, 0}} {
		if got := Ratio(c.busy, c.workers, c.wall); got != c.want {
			t.Errorf("Ratio(%v, %d, %v) = %v, want %v", c.busy, c.workers, c.wall, got, c.want)
		}
	}
}

// Guarantee: a negative duration counts as 0, in the first bucket and
// adding nothing to the sum.
func TestRecorderCountsANegativeDurationAsZero(t *testing.T) {
	r := NewLatency()
	r.ObserveDuration(-time.Second)
	var h Histogram
	r.AddTo(&h)
	if h.Counts[0] != 1 || h.Count != 1 || h.Sum != 0 {
		t.Fatalf("-1s: counts %v count %d sum %v, want bucket 0, count 1 and sum 0", h.Counts, h.Count, h.Sum)
	}
}

// Guarantee: AddTo adds a recorder to what the histogram holds already,
// so that the shards of a stage add up to one histogram.
func TestRecordersAddUpInOneHistogram(t *testing.T) {
	a, b := NewSize(), NewSize()
	a.ObserveSize(1)
	a.ObserveSize(3)
	b.ObserveSize(3)
	b.ObserveSize(20000)
	var h Histogram
	a.AddTo(&h)
	b.AddTo(&h)
	if h.Counts[0] != 1 || h.Counts[2] != 2 || h.Counts[len(SizeBounds)] != 1 || h.Count != 4 || h.Sum != 20007 {
		t.Fatalf("sizes 1, 3 and 3, 20000 from two recorders: counts %v count %d sum %v, want 1 in bucket 0, 2 in bucket 2, 1 above the bounds, count 4 and sum 20007",
			h.Counts, h.Count, h.Sum)
	}
}

// Guarantee: Quantile's first bucket starts at 0, an empty bucket holds no
// quantile (a rank at a bucket's end is that bucket's bound, even when
// the buckets after it are empty), and the 0-quantile is the lower bound
// of the first bucket with observations.
func TestQuantileAtTheEdgesOfTheBuckets(t *testing.T) {
	for _, c := range []struct {
		counts []uint64
		q      float64
		want   float64
	}{
		{[]uint64{10, 0, 0, 0}, 0.5, 0.5},
		{[]uint64{0, 10, 0, 10}, 0.5, 2},
		{[]uint64{0, 10, 10, 0}, 0, 1},
		{[]uint64{0, 0, 10, 0}, 0, 2},
	} {
		h := Histogram{Bounds: []float64{1, 2, 4}, Counts: c.counts}
		for _, n := range c.counts {
			h.Count += n
		}
		if got := h.Quantile(c.q); got != c.want {
			t.Errorf("bounds %v counts %v: Quantile(%v) = %v, want %v", h.Bounds, c.counts, c.q, got, c.want)
		}
	}
}

// Guarantee: failures are counted, stored, added and totalled by their
// own disposition (0 default, 1 retry, 2 discard, anything else default).
func TestFailuresKeepEachDispositionApart(t *testing.T) {
	var f Failures
	for _, d := range []uint8{0, 1, 1, 2, 2, 2, 7} {
		f.Count(d)
	}
	if want := (Failures{Default: 2, Retry: 2, Discard: 3}); f != want || f.Total() != 7 {
		t.Fatalf("Failures.Count: %+v total %d, want %+v total 7", f, f.Total(), want)
	}
	var c FailureCounters
	c.Store(f)
	for _, d := range []uint8{0, 1, 2, 2} {
		c.Count(d)
	}
	var got Failures
	c.AddTo(&got)
	c.AddTo(&got)
	if want := (Failures{Default: 6, Retry: 6, Discard: 10}); got != want {
		t.Fatalf("FailureCounters stored %+v, counted 0, 1, 2, 2 and added twice: %+v, want %+v", f, got, want)
	}
	var one FailureCounters
	one.Store(Failures{Default: 1, Retry: 1, Discard: 1})
	one.Store(Failures{})
	var ones Failures
	one.AddTo(&ones)
	if want := (Failures{Default: 1, Retry: 1, Discard: 1}); ones != want {
		t.Fatalf("FailureCounters stored one failure of each disposition, then none: %+v, want %+v", ones, want)
	}
	got.Add(Failures{Default: 1, Retry: 20, Discard: 300})
	if want := (Failures{Default: 7, Retry: 26, Discard: 310}); got != want || got.Total() != 343 {
		t.Fatalf("Failures.Add: %+v total %d, want %+v total 343", got, got.Total(), want)
	}
}
