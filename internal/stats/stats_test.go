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

// Guarantee: Ratio is busy ÷ (workers × wall), clamped to [0, 1], and 0
// without wall time or workers.
func TestRatio(t *testing.T) {
	for _, c := range []struct {
		busy    time.Duration
		workers int
		wall    time.Duration
		want    float64
	}{{time.Second, 2, time.Second, 0.5}, {3 * time.Second, 2, time.Second, 1}, {time.Second, 0, time.Second, 0}, {time.Second, 1, 0, 0}} {
		if got := Ratio(c.busy, c.workers, c.wall); got != c.want {
			t.Errorf("Ratio(%v, %d, %v) = %v, want %v", c.busy, c.workers, c.wall, got, c.want)
		}
	}
}
