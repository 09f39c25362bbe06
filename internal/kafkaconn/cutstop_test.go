package kafkaconn

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/IBM/sarama"
)

// heldConn is a connection whose Close tells closing it began, then
// returns once release is closed.
type heldConn struct {
	net.Conn
	closing, release chan struct{}
}

func (c heldConn) Close() error {
	close(c.closing)
	<-c.release
	return nil
}

// armings are the two ways of arming a cut of s, each due in one second.
var armings = []struct {
	name string
	arm  func(t *testing.T, s *Set) (stop func() bool)
}{
	{"CutAfter", func(_ *testing.T, s *Set) func() bool { return s.CutAfter(time.Second) }},
	{"CutWhenDone", func(t *testing.T, s *Set) func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		t.Cleanup(cancel)
		return s.CutWhenDone(ctx)
	}},
}

// eachArming runs check, in a synctest bubble, once for each arming of
// a cut of a set s holding one heldConn c; stop is the arming's.
func eachArming(t *testing.T, check func(t *testing.T, s *Set, c heldConn, stop func() bool)) {
	for _, a := range armings {
		t.Run(a.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(sarama.NewConfig())
				c := heldConn{closing: make(chan struct{}), release: make(chan struct{})}
				s.conns[&setConn{Conn: c, set: s}] = struct{}{}
				check(t, s, c, a.arm(t, s))
			})
		})
	}
}

// Guarantee: the stop of a cut that has begun returns false only once
// the cut has ended (every connection closed), so that nothing the
// arming started outlives the stop; a second stop returns the same.
func TestStoppingACutUnderWayWaitsForIt(t *testing.T) {
	eachArming(t, func(t *testing.T, _ *Set, c heldConn, stop func() bool) {
		<-c.closing // the cut is under way, closing the connection
		var stopped atomic.Bool
		var disarmed bool
		go func() {
			disarmed = stop()
			stopped.Store(true)
		}()
		synctest.Wait()
		early := stopped.Load()
		close(c.release)
		if early {
			t.Fatal("stop returned while the cut it armed was still closing a connection")
		}
		synctest.Wait()
		if !stopped.Load() {
			t.Fatal("stop did not return once the cut had ended")
		}
		if disarmed || stop() {
			t.Fatal("stop reported it disarmed a cut that had run")
		}
	})
}

// Guarantee: a cut stopped before it is due never runs: stop reports
// true, again when called a second time, and the connections stay open.
func TestAStoppedCutNeverRuns(t *testing.T) {
	eachArming(t, func(t *testing.T, s *Set, c heldConn, stop func() bool) {
		if !stop() {
			t.Fatal("stop reported it did not disarm a cut not yet due")
		}
		if !stop() {
			t.Fatal("a second stop did not return the first one's result")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		select {
		case <-c.closing:
			t.Fatal("a stopped cut closed a connection")
		default:
		}
		if s.isCut() {
			t.Fatal("a stopped cut cut the set")
		}
	})
}
