package claim

import (
	"errors"
	"testing"
)

// Guarantee: a fetcher's run of failures is logged once: the first
// failure, then again only for another message or after the fetcher
// handed records over since (its progress moved).
func TestFailureRunLogsOncePerRun(t *testing.T) {
	var f FailureRun
	a, b := errors.New("a"), errors.New("b")
	for i, step := range []struct {
		err  error
		at   int64
		want bool
	}{
		{a, 5, true},
		{a, 5, false},
		{a, 5, false},
		{b, 5, true},
		{b, 5, false},
		{b, 9, true},
		{b, 9, false},
	} {
		if got := f.Log(step.err, step.at); got != step.want {
			t.Fatalf("step %d: Log(%v, %d) = %v, want %v", i, step.err, step.at, got, step.want)
		}
	}
}
