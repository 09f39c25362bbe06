package kafkaconn

import (
	"errors"
	"io"
	"net"
	"testing"
	"testing/synctest"
	"time"
)

// blindDialer is a configured dialer that takes no context: a dial waits
// until release is closed, then returns one end of a pipe, whose other
// end it keeps in peer.
type blindDialer struct {
	started chan struct{} // closed as the dial starts
	release chan struct{}
	peer    net.Conn
}

func (d *blindDialer) Dial(_, _ string) (net.Conn, error) {
	close(d.started)
	<-d.release
	c, p := net.Pipe()
	d.peer = p
	return c, nil
}

// Guarantee: a dial under way as its set, or the set that set is a child
// of, is cut fails at once with ErrCut even when the dialer the set
// wraps takes no context (a Net.Proxy.Dialer with only Dial): the dial
// is left to return on its own, and the connection it makes then is
// closed, so that a Close cutting the connections past its deadline does
// not wait for the dialer.
func TestADialThroughADialerWithoutAContextEndsWhenItsSetIsCut(t *testing.T) {
	for _, cutParent := range []bool{false, true} {
		t.Run(map[bool]string{false: "child", true: "parent"}[cutParent], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d := &blindDialer{started: make(chan struct{}), release: make(chan struct{})}
				parent, child := cutDuringDial(t, d, d.started, cutParent)
				close(d.release) // the dialer returns at last
				synctest.Wait()
				_ = d.peer.SetReadDeadline(time.Now().Add(10 * time.Second)) // an open connection reads nothing: no EOF
				if _, err := d.peer.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
					t.Errorf("the connection a dial cut under way made once its dialer returned is open (read = %v), want closed", err)
				}
				if parent.Len() != 0 || child.Len() != 0 {
					t.Errorf("the sets hold %d and %d connections after a dial cut under way, want none", parent.Len(), child.Len())
				}
			})
		})
	}
}
