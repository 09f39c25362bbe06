package monitor

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/observe"
)

// shortClose are the default limits with a Close bounded to 1.2 s in all,
// so that a test waits less for a connection Close has to end.
func shortClose() *limits {
	l := serverLimits
	l.shutdown = 200 * time.Millisecond
	l.closeWait = time.Second
	return &l
}

// serve starts a Server with lim on a loopback port.
func serve(t *testing.T, lim *limits) *Server {
	t.Helper()
	s, err := Flags{HTTP: "127.0.0.1:0", limits: lim}.Serve(observe.New(observe.Options{}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// dial opens a TCP connection to s, closed when the test ends.
func dial(t *testing.T, s *Server) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c.(*net.TCPConn)
}

// roundTrip sends a GET of path on c and reads its response whole.
func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader, path string) *http.Response {
	t.Helper()
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// neverRead sends, on c, more requests for the dashboard than the
// socket buffers of both ends can hold the answers of, and never reads
// them: the server ends up blocked writing. The client's own buffer is
// kept small (no autotuning). It returns once the requests are written or
// the connection fails.
func neverRead(t *testing.T, c *net.TCPConn) <-chan struct{} {
	t.Helper()
	if err := c.SetReadBuffer(4 << 10); err != nil {
		t.Fatal(err)
	}
	// 4,000 answers of the 12 KiB page: about 50 MB.
	reqs := strings.Repeat("GET /dashboard HTTP/1.1\r\nHost: x\r\n\r\n", 4000)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.WriteString(c, reqs)
	}()
	t.Cleanup(func() { _ = c.Close(); <-done })
	return done
}

// blockedWriting reports whether a goroutine of net/http's server is
// blocked writing to its connection (the client not reading).
func blockedWriting() bool {
	buf := make([]byte, 1<<20)
	for g := range strings.SplitSeq(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "net/http.(*conn).serve") && strings.Contains(g, "waitWrite") {
			return true
		}
	}
	return false
}

// closeWithin calls s.Close and fails t unless it returns within bound
// and leaves no goroutine of the server (nor of the test) running.
func closeWithin(t *testing.T, s *Server, bound time.Duration, ignore ...goleak.Option) {
	t.Helper()
	start := time.Now()
	s.Close(context.Background())
	if el := time.Since(start); el > bound {
		t.Errorf("Close returned after %v, want at most %v", el, bound)
	}
	if n := s.conns.open(); n != 0 {
		t.Errorf("%d connection(s) still open after Close", n)
	}
	if err := goleak.Find(ignore...); err != nil {
		t.Errorf("goroutines left after Close: %v", err)
	}
}

// Guarantee: a client that sends requests and never reads the answers
// does not keep its connection, nor the goroutine serving it, past Close:
// Close gives the requests being handled its shutdown grace, then closes
// every connection, and returns within its bound.
func TestCloseEndsAConnectionWhoseClientNeverReads(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	s := serve(t, shortClose())
	c := dial(t, s)
	written := neverRead(t, c)
	wait.For(t, "the server to be blocked writing answers nobody reads", blockedWriting)
	closeWithin(t, s, 3*time.Second, ignore, goleak.IgnoreAnyFunction("github.com/boulevard-go/boulevard/examples/internal/monitor.neverRead.func1"))
	_ = c.Close()
	<-written
	if err := goleak.Find(ignore); err != nil {
		t.Errorf("goroutines left: %v", err)
	}
}

// Guarantee: a connection that sends nothing (no request yet) does not
// outlive Close, although the server's shutdown would not count it idle
// before it is 5 s old.
func TestCloseEndsAConnectionThatSendsNothing(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	s := serve(t, shortClose())
	dial(t, s)
	wait.For(t, "the server to accept the connection", func() bool { return s.conns.open() == 1 })
	closeWithin(t, s, 3*time.Second, ignore)
}

// Guarantee: a client sending a request header a byte at a time does not
// keep its connection past Close.
func TestCloseEndsAConnectionSendingItsHeaderSlowly(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	s := serve(t, shortClose())
	c := dial(t, s)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		hdr := "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + strings.Repeat("a", 10000)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := range len(hdr) {
			if _, err := c.Write([]byte{hdr[i]}); err != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	wait.For(t, "the server to accept the connection", func() bool { return s.conns.open() == 1 })
	closeWithin(t, s, 3*time.Second, ignore, goleak.IgnoreAnyFunction("github.com/boulevard-go/boulevard/examples/internal/monitor.TestCloseEndsAConnectionSendingItsHeaderSlowly.func1"))
	close(stop)
	<-done
	if err := goleak.Find(ignore); err != nil {
		t.Errorf("goroutines left: %v", err)
	}
}

// Guarantee: an idle keep-alive connection (a request answered, the
// connection kept for the next) does not outlive Close.
func TestCloseEndsAnIdleKeepAliveConnection(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	s := serve(t, shortClose())
	c := dial(t, s)
	if resp := roundTrip(t, c, bufio.NewReader(c), "/healthz"); resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("got %s (close %v), want 200 on a kept connection", resp.Status, resp.Close)
	}
	closeWithin(t, s, 3*time.Second, ignore)
}

// runLimits are the default limits with the given read, write and idle
// timeouts.
func runLimits(read, write, idle time.Duration) *limits {
	l := serverLimits
	l.read, l.write, l.idle = read, write, idle
	return &l
}

// Guarantee: while the server runs, a keep-alive connection that sends no
// further request is closed by the server once it has been idle for the
// idle timeout: idle connections do not pile up.
func TestServerEndsAnIdleKeepAliveConnection(t *testing.T) {
	s := serve(t, runLimits(time.Minute, time.Minute, 100*time.Millisecond))
	defer s.Close(context.Background())
	c := dial(t, s)
	r := bufio.NewReader(c)
	roundTrip(t, c, r, "/healthz")
	_ = c.SetReadDeadline(time.Now().Add(wait.Deadline))
	if _, err := r.ReadByte(); err != io.EOF {
		t.Fatalf("read %v from the idle connection, want io.EOF: the server closing it", err)
	}
}

// Guarantee: while the server runs, a client that never reads its answers
// loses its connection once an answer has waited for the write timeout:
// the goroutine serving it does not stay blocked writing.
func TestServerEndsAClientThatNeverReads(t *testing.T) {
	s := serve(t, runLimits(time.Minute, 300*time.Millisecond, time.Minute))
	defer s.Close(context.Background())
	c := dial(t, s)
	neverRead(t, c)
	wait.For(t, "the server to accept the connection", func() bool { return s.conns.open() == 1 })
	wait.For(t, "the server to close the connection of a client that never reads", func() bool { return s.conns.open() == 0 })
}

// Guarantee: while the server runs, a client sending a request body a
// byte at a time (no endpoint reads one; the server reads what is left to
// keep the connection) loses its connection after the read timeout.
func TestServerEndsASlowBody(t *testing.T) {
	s := serve(t, runLimits(300*time.Millisecond, time.Minute, time.Minute))
	defer s.Close(context.Background())
	c := dial(t, s)
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for range 1000 {
			if _, err := c.Write([]byte{'a'}); err != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	defer func() { close(stop); <-done }()
	wait.For(t, "the server to accept the connection", func() bool { return s.conns.open() == 1 })
	wait.For(t, "the server to close the connection of a slow body", func() bool { return s.conns.open() == 0 })
}

// Guarantee: a request header larger than the server's bound (64 KiB, far
// more than a browser sends) is refused with 431 instead of being read
// into memory up to net/http's 1 MiB default.
func TestServerRefusesAHugeHeader(t *testing.T) {
	s := serve(t, nil)
	defer s.Close(context.Background())
	c := dial(t, s)
	go func() {
		_, _ = fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 200<<10))
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("got %s for a 200 KiB header, want 431", resp.Status)
	}
}

// Guarantee: the write timeout leaves a /metrics scrape the time observe
// gives it (twice the default StatsTimeout) and more; the idle timeout
// outlasts the dashboard's and Prometheus' one-second polls.
func TestServerLimitsFitTheEndpoints(t *testing.T) {
	l := serverLimits
	if l.write <= 2*observe.DefaultStatsTimeout+time.Second {
		t.Errorf("write timeout %v leaves a scrape of up to %v no time to answer", l.write, 2*observe.DefaultStatsTimeout)
	}
	if l.idle < 10*time.Second {
		t.Errorf("idle timeout %v: keep-alive connections of one-second polls would be dropped", l.idle)
	}
	if l.readHeader <= 0 || l.read < l.readHeader || l.maxHeaderBytes <= 0 || l.shutdown <= 0 || l.closeWait <= 0 {
		t.Errorf("limits %+v: every bound must be set", l)
	}
}
