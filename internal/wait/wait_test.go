package wait_test

import (
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

// recorder is a testing.TB that records Fatalf instead of stopping.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = format
	if len(args) > 0 {
		r.failed, _ = args[1].(string)
	}
}

// Guarantee: a condition never met fails the test once the bound has
// passed, naming what was awaited and the state described.
func TestWithinFailsAfterTheBound(t *testing.T) {
	r := &recorder{TB: t}
	begin := time.Now()
	polls := 0
	wait.Within(r, 20*time.Millisecond, "nothing", func() bool {
		polls++
		return r.failed != "" // never before Fatalf; stops the loop after it
	}, func() string { return "state" })
	if took := time.Since(begin); took < 20*time.Millisecond {
		t.Fatalf("gave up after %v, before the bound", took)
	}
	if r.failed != "nothing; state" || polls < 2 {
		t.Fatalf("failure %q after %d polls, want \"nothing; state\" after several", r.failed, polls)
	}
}
