package claim

import (
	"errors"
	"testing"
)

// Guarantee: a fetcher's run of failures is logged once: the first
// failure, then again only for another message or after the fetcher
// handed records over since (its progress moved); each key has its own
// run.
func TestFailureRunsLogOncePerRun(t *testing.T) {
	var f FailureRuns[string]
	a, b := errors.New("a"), errors.New("b")
	for i, step := range []struct {
		key  string
		err  error
		at   int64
		want bool
	}{
		{"p0", a, 5, true},
		{"p0", a, 5, false},
		{"p0", a, 5, false},
		{"p1", a, 5, true},
		{"p0", b, 5, true},
		{"p0", b, 5, false},
		{"p0", b, 9, true},
		{"p0", b, 9, false},
	} {
		if got := f.Log(step.key, step.err, step.at); got != step.want {
			t.Fatalf("step %d: Log(%s, %v, %d) = %v, want %v", i, step.key, step.err, step.at, got, step.want)
		}
	}
}
