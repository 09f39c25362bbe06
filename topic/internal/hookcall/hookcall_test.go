package hookcall_test

import (
	"log/slog"
	"runtime"
	"strings"
	"testing"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/topic/internal/hookcall"
)

// exitingObserver ends its goroutine (runtime.Goexit, as t.FailNow does)
// in both of its calls.
type exitingObserver struct{}

func (exitingObserver) Degrade(error) { runtime.Goexit() }
func (exitingObserver) Recovered()    { runtime.Goexit() }

// Guarantee: a Reach observer whose Degrade or Recovered ends its
// goroutine (runtime.Goexit) ends only a goroutine of its own: the call
// returns to the backend's goroutine, and costs one error line with
// ReachExited, the caller's attributes, the hook and the stack of the
// exit.
func TestAReachObserverThatExitsLeavesTheCallerGoing(t *testing.T) {
	for hook, call := range map[string]func(hookcall.Observer){
		"Degrade":   func(o hookcall.Observer) { o.Degrade(nil) },
		"Recovered": hookcall.Observer.Recovered,
	} {
		t.Run(hook, func(t *testing.T) {
			var lines logtest.Lines
			o := hookcall.Reach(exitingObserver{}, slog.New(slog.NewTextHandler(&lines, nil)), slog.String("topic", "t"))
			returned := make(chan bool)
			go func() {
				ok := false
				defer func() { returned <- ok }()
				call(o)
				ok = true
			}()
			if !<-returned {
				t.Fatalf("the observer's exit in %s ended the caller's goroutine", hook)
			}
			all := lines.All()
			if len(all) != 1 {
				t.Fatalf("%d log lines, want one for the exit: %q", len(all), all)
			}
			for _, want := range []string{"level=ERROR", hookcall.ReachExited, "topic=t", "hook=" + hook, "stack="} {
				if !strings.Contains(all[0], want) {
					t.Fatalf("log line %q does not contain %q", all[0], want)
				}
			}
		})
	}
}
