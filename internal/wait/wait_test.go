package wait_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/internal/wait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Guarantee: For returns as soon as the condition holds, polling it until
// then.
func TestForReturnsOnceTheConditionHolds(t *testing.T) {
	var polls atomic.Int32
	wait.For(t, "the third poll", func() bool { return polls.Add(1) == 3 })
	if n := polls.Load(); n != 3 {
		t.Fatalf("polled %d times, want 3", n)
	}
}

// recorder is a testing.TB that records Fatalf's message instead of
// stopping.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
}

// parkedUntil blocks until ch is closed: a goroutine whose stack a failure
// shows.
func parkedUntil(ch chan struct{}) { <-ch }

// Guarantee: a condition never met fails the test once the bound has
// passed, naming what was awaited, the state as described then, and every
// goroutine's stack.
func TestWithinFailsAfterTheBound(t *testing.T) {
	r := &recorder{TB: t}
	stop := make(chan struct{})
	defer close(stop)
	go parkedUntil(stop)
	begin := time.Now()
	polls := 0
	wait.Within(r, 20*time.Millisecond, "nothing", func() bool {
		polls++
		return r.failed != "" // never before Fatalf; stops the loop after it
	}, func() string { return fmt.Sprintf("%d polls", polls) })
	if took := time.Since(begin); took < 20*time.Millisecond {
		t.Fatalf("gave up after %v, before the bound", took)
	}
	// The poll after Fatalf returned true.
	if want := fmt.Sprintf("timed out after 20ms waiting for nothing; %d polls\n", polls-1); polls < 3 || !strings.HasPrefix(r.failed, want) {
		t.Fatalf("failure %.200q after %d polls, want it to start with %q after several", r.failed, polls, want)
	}
	if !strings.Contains(r.failed, "wait_test.parkedUntil") {
		t.Fatalf("failure lacks the stack of another goroutine:\n%s", r.failed)
	}
}

// Guarantee: Stable returns once the sample has not changed for the quiet
// period, counted from its last change.
func TestStableReturnsOnceTheSampleStoppedChangingForTheQuietPeriod(t *testing.T) {
	r := &recorder{TB: t}
	polls := 0
	var changed time.Time
	wait.Stable(r, 10*time.Second, 100*time.Millisecond, "the sample", func() string {
		polls++
		if polls <= 3 {
			changed = time.Now()
		}
		return fmt.Sprint(min(polls, 3))
	})
	if r.failed != "" {
		t.Fatalf("failed: %s", r.failed)
	}
	if quiet := time.Since(changed); quiet < 100*time.Millisecond {
		t.Fatalf("returned %v after the sample last changed, before the quiet period", quiet)
	}
}

// Guarantee: Stable fails the test once the bound has passed while the
// sample keeps changing, naming what was awaited and the last value.
func TestStableFailsAfterTheBoundWhileTheSampleKeepsChanging(t *testing.T) {
	r := &recorder{TB: t}
	polls := 0
	wait.Stable(r, 100*time.Millisecond, 50*time.Millisecond, "the counter", func() string {
		polls++
		return fmt.Sprint(polls)
	})
	if want := "timed out after 100ms waiting for the counter (last "; !strings.HasPrefix(r.failed, want) {
		t.Fatalf("failure %q, want it to start with %q", r.failed, want)
	}
}
