package observe_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/validate"
)

// quiet is a logger that drops everything.
var quiet = slog.New(slog.DiscardHandler)

// startServer serves obs with opts, on a loopback port unless opts names
// an address, quietly unless opts names a logger; the Server is closed
// when the test ends.
func startServer(t *testing.T, obs *observe.Observer, opts observe.ServerOptions) *observe.Server {
	t.Helper()
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	s, err := obs.Serve(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// shortClose are the default options with a Close bounded to 400ms.
func shortClose() observe.ServerOptions {
	return observe.ServerOptions{ShutdownTimeout: 200 * time.Millisecond}
}

// dial opens a TCP connection to s, closed when the test ends.
func dial(t *testing.T, s *observe.Server) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c.(*net.TCPConn)
}

// accepted waits until s has accepted n connections that are open.
func accepted(t *testing.T, s *observe.Server, n int) {
	t.Helper()
	wait.For(t, fmt.Sprintf("the server to hold %d connection(s)", n), func() bool { return observe.OpenConns(s) == n })
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

// trickle writes s to c a byte every 10ms on a goroutine of its own,
// until it is written, c fails or the test ends (which waits for it).
func trickle(t *testing.T, c net.Conn, s string) {
	t.Helper()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := range len(s) {
			if _, err := c.Write([]byte{s[i]}); err != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
}

// neverRead sends, on c, more requests for the dashboard than the socket
// buffers of both ends can hold the answers of, and never reads them: the
// server ends up blocked writing. The client's own buffer is kept small
// (no autotuning). The writing goroutine ends when the connection does,
// or when the test ends (which closes c and waits for it).
func neverRead(t *testing.T, c *net.TCPConn) {
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
}

// serverBlocked returns a function reporting whether a goroutine of
// net/http's server is in a call of each of calls (one blocked writing,
// "waitWrite", or reading, "waitRead").
func serverBlocked(calls ...string) func() bool {
	return func() bool {
		buf := make([]byte, 1<<20)
	next:
		for g := range strings.SplitSeq(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if !strings.Contains(g, "net/http.(*conn).serve") {
				continue
			}
			for _, c := range calls {
				if !strings.Contains(g, c) {
					continue next
				}
			}
			return true
		}
		return false
	}
}

// Guarantee: an invalid option is refused by Serve before it listens,
// with an error naming the field and the rule; every bound is the
// constant the documentation gives, inclusive.
func TestServeRefusesInvalidOptionsNamingTheField(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	busy := held.Addr().String() // listening on it would fail: the options must fail first
	for _, c := range []struct {
		opts        observe.ServerOptions
		field, rule string
	}{
		{observe.ServerOptions{}, "observe.server.addr", "required"},
		{observe.ServerOptions{Addr: busy, ReadHeaderTimeout: -1}, "observe.server.readHeaderTimeout", "gte"},
		{observe.ServerOptions{Addr: busy, ReadHeaderTimeout: observe.MaxServerTimeout + 1}, "observe.server.readHeaderTimeout", "lte"},
		{observe.ServerOptions{Addr: busy, ReadTimeout: -1}, "observe.server.readTimeout", "gte"},
		{observe.ServerOptions{Addr: busy, ReadTimeout: observe.MaxServerTimeout + 1}, "observe.server.readTimeout", "lte"},
		{observe.ServerOptions{Addr: busy, WriteTimeout: -1}, "observe.server.writeTimeout", "gte"},
		{observe.ServerOptions{Addr: busy, WriteTimeout: observe.MaxServerTimeout + 1}, "observe.server.writeTimeout", "lte"},
		{observe.ServerOptions{Addr: busy, IdleTimeout: -1}, "observe.server.idleTimeout", "gte"},
		{observe.ServerOptions{Addr: busy, IdleTimeout: observe.MaxServerTimeout + 1}, "observe.server.idleTimeout", "lte"},
		{observe.ServerOptions{Addr: busy, MaxHeaderBytes: -1}, "observe.server.maxHeaderBytes", "gte"},
		{observe.ServerOptions{Addr: busy, MaxHeaderBytes: observe.MaxServerHeaderBytes + 1}, "observe.server.maxHeaderBytes", "lte"},
		{observe.ServerOptions{Addr: busy, ShutdownTimeout: observe.MaxShutdownTimeout + 1}, "observe.server.shutdownTimeout", "lte"},
		{observe.ServerOptions{Addr: busy, ShutdownTimeout: -1}, "observe.server.shutdownTimeout", "gte"},
	} {
		s, err := observe.New(observe.Options{}).Serve(context.Background(), c.opts)
		var errs validate.Errors
		if s != nil || !errors.As(err, &errs) || !errs.Has(c.field, c.rule) || len(errs) != 1 {
			t.Errorf("%+v: Serve = %v, %v; want only the error of %s (%s)", c.opts, s, err, c.field, c.rule)
		}
	}
	atBounds := observe.ServerOptions{
		Addr: busy, ReadHeaderTimeout: observe.MaxServerTimeout, ReadTimeout: observe.MaxServerTimeout,
		WriteTimeout: observe.MaxServerTimeout, IdleTimeout: observe.MaxServerTimeout,
		MaxHeaderBytes: observe.MaxServerHeaderBytes, ShutdownTimeout: observe.MaxShutdownTimeout,
	}
	if err := atBounds.Validate(); err != nil {
		t.Errorf("options at their bounds refused: %v", err)
	}
}

// Guarantee: an address that cannot be listened on (a port in use, an
// address without a port) is Serve's error, returned at once, and leaves
// nothing running.
func TestServeReportsAnAddressItCannotListenOn(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	obs := observe.New(observe.Options{})
	s, err := obs.Serve(context.Background(), observe.ServerOptions{Addr: held.Addr().String(), Logger: quiet})
	if s != nil || !errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(err.Error(), held.Addr().String()) {
		t.Errorf("serving on a port in use: Serve = %v, %v; want an error wrapping EADDRINUSE naming the address", s, err)
	}
	s, err = obs.Serve(context.Background(), observe.ServerOptions{Addr: "localhost", Logger: quiet})
	if s != nil || err == nil {
		t.Errorf("serving on an address without a port: Serve = %v, %v; want an error", s, err)
	}
	if err := goleak.Find(ignore); err != nil {
		t.Errorf("goroutines left by a Serve that failed: %v", err)
	}
}

// Guarantee: a closed Observer starts no Server: Serve returns ErrClosed,
// as Add does, listening on nothing and leaving nothing running.
func TestServeAfterCloseReturnsErrClosed(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	obs := observe.New(observe.Options{})
	if err := obs.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	s, err := obs.Serve(context.Background(), observe.ServerOptions{Addr: "127.0.0.1:0", Logger: quiet})
	if s != nil || !errors.Is(err, observe.ErrClosed) {
		t.Errorf("Serve after Close = (a Server: %t), %v; want no Server and ErrClosed", s != nil, err)
	}
	if s != nil {
		s.Close(context.Background())
	}
	if err := goleak.Find(ignore); err != nil {
		t.Errorf("goroutines left by a Serve after Close: %v", err)
	}
}

// Guarantee: an address without a host (":0", ":9090") listens on the
// loopback interface only, not on every interface as net.Listen would; a
// host given is used as given.
func TestServeWithoutAHostListensOnLoopbackOnly(t *testing.T) {
	for _, c := range []struct{ addr, host string }{
		{":0", "127.0.0.1"},
		{"127.0.0.1:0", "127.0.0.1"},
		{"0.0.0.0:0", "::"}, // told otherwise: every interface (Go reports it as [::] on a dual-stack host)
	} {
		s := startServer(t, observe.New(observe.Options{}), observe.ServerOptions{Addr: c.addr})
		host, _, err := net.SplitHostPort(s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if c.host == "::" {
			if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
				t.Errorf("Addr %s listens on %s, want every interface", c.addr, s.Addr())
			}
			continue
		}
		if host != c.host {
			t.Errorf("Addr %s listens on %s, want host %s", c.addr, s.Addr(), c.host)
		}
	}
}

// Guarantee: the Server serves the Observer's endpoints to an HTTP
// client: /metrics from the Gatherer given (the program's own series with
// the Observer's), /healthz and /readyz; it logs one line saying where,
// and Close stops it.
func TestServerServesTheEndpoints(t *testing.T) {
	obs := observe.New(observe.Options{Logger: quiet})
	defer obs.Close(context.Background())
	if err := obs.Add(context.Background(), pushPipeline(t, "orders")); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(obs)
	own := prometheus.NewCounter(prometheus.CounterOpts{Name: "app_requests_total", Help: "Requests."})
	reg.MustRegister(own)
	own.Add(3)
	var log logRecorder
	s := startServer(t, obs, observe.ServerOptions{Gatherer: reg, Logger: slog.New(&log)})
	if lines := log.lines("addr=" + s.Addr()); len(lines) != 1 {
		t.Errorf("logged %q, want one line with the address", log.lines())
	}
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	get := func(path string) (int, string) {
		resp, err := client.Get("http://" + s.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(body)
	}
	code, body := get("/metrics")
	if code != http.StatusOK || !strings.Contains(body, `boulevard_pipeline_up{pipeline="orders"} 1`) || !strings.Contains(body, "app_requests_total 3") {
		t.Errorf("/metrics: %d\n%s\nwant 200 with the pipeline's series and the program's own", code, body)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := get(path); code != http.StatusOK || !strings.Contains(body, `"name":"orders","ok":true`) {
			t.Errorf("%s: %d %s, want 200 naming the pipeline", path, code, body)
		}
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := client.Get("http://" + s.Addr() + "/healthz"); err == nil {
		t.Error("still serving after Close")
	}
}

// closeWithin calls s.Close and fails t unless it returns nil within
// bound, leaving no connection open and no goroutine of the server (nor
// of the test) running.
func closeWithin(t *testing.T, s *observe.Server, bound time.Duration, ignore goleak.Option) {
	t.Helper()
	start := time.Now()
	if err := s.Close(context.Background()); err != nil {
		t.Errorf("Close: %v", err)
	}
	if el := time.Since(start); el > bound {
		t.Errorf("Close returned after %v, want at most %v", el, bound)
	}
	if n := observe.OpenConns(s); n != 0 {
		t.Errorf("%d connection(s) still open after Close", n)
	}
	if err := goleak.Find(ignore, goleak.IgnoreAnyFunction("github.com/boulevard-go/boulevard/observe_test.neverRead.func1"),
		goleak.IgnoreAnyFunction("github.com/boulevard-go/boulevard/observe_test.trickle.func1")); err != nil {
		t.Errorf("goroutines left after Close: %v", err)
	}
}

// Guarantee: no client holds Close past its bound (twice
// ShutdownTimeout): one that sends nothing, sends its header a byte at a
// time, never finishes its body, never reads its answers, or keeps an
// idle keep-alive connection. Close gives the requests being handled
// ShutdownTimeout, then closes every connection left.
func TestASlowClientCannotHoldClose(t *testing.T) {
	for _, c := range []struct {
		name   string
		client func(t *testing.T, s *observe.Server, c *net.TCPConn)
	}{
		{"sends nothing", func(t *testing.T, s *observe.Server, c *net.TCPConn) { accepted(t, s, 1) }},
		{"sends its header a byte at a time", func(t *testing.T, s *observe.Server, c *net.TCPConn) {
			trickle(t, c, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "+strings.Repeat("a", 10000))
			accepted(t, s, 1)
		}},
		{"never finishes its body", func(t *testing.T, s *observe.Server, c *net.TCPConn) {
			if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\na"); err != nil {
				t.Fatal(err)
			}
			// The handler does not read the body: the server reads what is
			// left before it answers, to keep the connection.
			wait.For(t, "the server to wait for the rest of the body", serverBlocked("(*chunkWriter).writeHeader", "waitRead"))
		}},
		{"never reads its answers", func(t *testing.T, s *observe.Server, c *net.TCPConn) {
			neverRead(t, c)
			wait.For(t, "the server to be blocked writing answers nobody reads", serverBlocked("waitWrite"))
		}},
		{"keeps an idle keep-alive connection", func(t *testing.T, s *observe.Server, c *net.TCPConn) {
			if resp := roundTrip(t, c, bufio.NewReader(c), "/healthz"); resp.StatusCode != http.StatusOK || resp.Close {
				t.Fatalf("got %s (close %v), want 200 on a kept connection", resp.Status, resp.Close)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			s := startServer(t, observe.New(observe.Options{}), shortClose())
			c.client(t, s, dial(t, s))
			closeWithin(t, s, 3*time.Second, ignore)
		})
	}
}

// blockedScrape starts a Server whose Gatherer blocks until the test
// calls the function returned (or ends), with the Observer's StatsTimeout at its
// longest (so that a scrape waits two minutes for it) and the
// ShutdownTimeout shutdown, sends a /metrics scrape, and returns once the
// scrape waits for the Gatherer.
func blockedScrape(t *testing.T, shutdown time.Duration) (*observe.Server, func()) {
	t.Helper()
	release := make(chan struct{})
	unblock := sync.OnceFunc(func() { close(release) })
	entered := make(chan struct{}, 1)
	reg := prometheus.NewRegistry()
	reg.MustRegister(blockingCollector{desc: prometheus.NewDesc("app_blocked", "Blocks.", nil, nil), release: release})
	g := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		select {
		case entered <- struct{}{}:
		default:
		}
		return reg.Gather()
	})
	obs := observe.New(observe.Options{StatsTimeout: observe.MaxStatsTimeout, Logger: quiet})
	s := startServer(t, obs, observe.ServerOptions{Gatherer: g, ShutdownTimeout: shutdown})
	c := dial(t, s)
	if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(wait.Deadline):
		t.Fatal("the scrape never reached the Gatherer")
	}
	t.Cleanup(unblock) // before the Server's Close
	return s, unblock
}

// closeBlocked calls Close with ctx on a Server whose scrape blocks
// (blockedScrape with shutdown), and fails t unless it returns within
// bound; then it lets the scrape end, and fails t unless a later Close
// returns nil, leaving no goroutine. It returns the first Close's error.
func closeBlocked(ctx context.Context, t *testing.T, shutdown, bound time.Duration) error {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	s, release := blockedScrape(t, shutdown)
	start := time.Now()
	err := s.Close(ctx)
	if el := time.Since(start); el > bound {
		t.Errorf("Close returned after %v, want at most %v", el, bound)
	}
	release()
	if err := s.Close(context.Background()); err != nil {
		t.Errorf("Close once the request ended: %v", err)
	}
	if err := goleak.Find(ignore); err != nil {
		t.Errorf("goroutines left after Close: %v", err)
	}
	return err
}

// Guarantee: Close returns by its context's deadline, with an error
// wrapping the context's, although a request still runs and
// ShutdownTimeout is far longer; the connections are closed all the same,
// and a later Close waits for the request's end.
func TestCloseReturnsByTheContextsDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	// 300ms and a busy machine's delays; ShutdownTimeout is a minute.
	if err := closeBlocked(ctx, t, observe.MaxShutdownTimeout, 5*time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v, want an error wrapping context.DeadlineExceeded", err)
	}
}

// Guarantee: when a request is still handled once Close has closed the
// connections and waited ShutdownTimeout more, Close returns within its
// bound with an error wrapping ErrRequestsPending that counts them; a
// later Close returns nil once the request has ended.
func TestCloseReportsRequestsStillHandled(t *testing.T) {
	// Twice 200ms and a busy machine's delays.
	err := closeBlocked(context.Background(), t, 200*time.Millisecond, 3*time.Second)
	if !errors.Is(err, observe.ErrRequestsPending) || !strings.Contains(err.Error(), "1 connection(s)") {
		t.Errorf("Close = %v, want an error wrapping ErrRequestsPending counting 1 connection", err)
	}
}

// Guarantee: Close may be called from several goroutines at once: each
// returns nil once every connection has ended.
func TestCloseMayBeCalledConcurrently(t *testing.T) {
	for range 10 {
		s := startServer(t, observe.New(observe.Options{}), shortClose())
		dial(t, s)
		accepted(t, s, 1)
		var wg sync.WaitGroup
		errs := make([]error, 3)
		for i := range errs {
			wg.Go(func() { errs[i] = s.Close(context.Background()) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("concurrent Close: %v", err)
		}
	}
}

// Guarantee: while the Server runs, a keep-alive connection that sends
// no further request is closed once it has been idle for IdleTimeout:
// idle connections do not pile up.
func TestServerEndsAnIdleKeepAliveConnection(t *testing.T) {
	s := startServer(t, observe.New(observe.Options{}), observe.ServerOptions{IdleTimeout: 100 * time.Millisecond})
	c := dial(t, s)
	r := bufio.NewReader(c)
	roundTrip(t, c, r, "/healthz")
	// Well before DefaultReadTimeout (10s), which net/http would use.
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.ReadByte(); err != io.EOF {
		t.Fatalf("read %v from the idle connection, want io.EOF: the server closing it", err)
	}
}

// Guarantee: while the Server runs, a client that never reads its
// answers loses its connection once an answer has waited for
// WriteTimeout: the goroutine serving it does not stay blocked writing.
func TestServerEndsAClientThatNeverReads(t *testing.T) {
	s := startServer(t, observe.New(observe.Options{}), observe.ServerOptions{WriteTimeout: 300 * time.Millisecond})
	neverRead(t, dial(t, s))
	accepted(t, s, 1)
	accepted(t, s, 0)
}

// Guarantee: while the Server runs, a client sending a request body a
// byte at a time (no endpoint reads one; the server reads what is left
// to keep the connection) loses its connection after ReadTimeout.
func TestServerEndsASlowBody(t *testing.T) {
	s := startServer(t, observe.New(observe.Options{}), observe.ServerOptions{ReadTimeout: 300 * time.Millisecond})
	c := dial(t, s)
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	trickle(t, c, strings.Repeat("a", 1000))
	accepted(t, s, 1)
	accepted(t, s, 0)
}

// Guarantee: by default a request header larger than 64 KiB, far more
// than a browser sends, is refused with 431 instead of being read into
// memory up to net/http's 1 MiB.
func TestServerRefusesAHugeHeader(t *testing.T) {
	s := startServer(t, observe.New(observe.Options{}), observe.ServerOptions{})
	c := dial(t, s)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 200<<10))
	}()
	defer func() { _ = c.Close(); <-done }()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("got %s for a 200 KiB header, want 431", resp.Status)
	}
}

// Guarantee: the defaults fit the endpoints: the write timeout leaves a
// /metrics scrape the time the Observer gives it (twice StatsTimeout)
// and more, whatever StatsTimeout; the idle timeout is the documented
// 30s, far past the dashboard's and a scraper's one-second polls.
func TestServerDefaultsFitTheEndpoints(t *testing.T) {
	o := observe.ServerOptions{}.WithDefaults()
	if o.IdleTimeout != 30*time.Second {
		t.Errorf("idle timeout %v, want the documented 30s, well past the one-second polls", o.IdleTimeout)
	}
	if o.ReadHeaderTimeout <= 0 || o.ReadTimeout < o.ReadHeaderTimeout || o.MaxHeaderBytes <= 0 || o.ShutdownTimeout <= 0 || o.Logger == nil {
		t.Errorf("defaults %+v: every bound must be set", o)
	}
	if o.WriteTimeout != 0 {
		t.Errorf("WithDefaults set WriteTimeout %v, which depends on the Observer", o.WriteTimeout)
	}
	if w := 2*observe.MaxStatsTimeout + 10*time.Second; w > observe.MaxServerTimeout {
		t.Errorf("the default write timeout at the longest StatsTimeout, %v, is above MaxServerTimeout", w)
	}
}

// Guarantee: zero ServerOptions take the defaults the field comments and
// docs/observability.md give: a 5s header read, a 10s request read, a
// 30s idle keep-alive, a 64 KiB header and a 1s shutdown grace; values
// set are kept.
func TestServerOptionsDefaultsAreTheDocumentedOnes(t *testing.T) {
	d := observe.ServerOptions{}.WithDefaults()
	set := observe.ServerOptions{ReadHeaderTimeout: time.Millisecond, ReadTimeout: 2 * time.Millisecond,
		IdleTimeout: 3 * time.Millisecond, MaxHeaderBytes: 4, ShutdownTimeout: 5 * time.Millisecond}
	kept := set.WithDefaults()
	for _, c := range []struct {
		field                 string
		got, want, given, own any
	}{
		{"ReadHeaderTimeout", d.ReadHeaderTimeout, 5 * time.Second, set.ReadHeaderTimeout, kept.ReadHeaderTimeout},
		{"ReadTimeout", d.ReadTimeout, 10 * time.Second, set.ReadTimeout, kept.ReadTimeout},
		{"IdleTimeout", d.IdleTimeout, 30 * time.Second, set.IdleTimeout, kept.IdleTimeout},
		{"MaxHeaderBytes", d.MaxHeaderBytes, 64 << 10, set.MaxHeaderBytes, kept.MaxHeaderBytes},
		{"ShutdownTimeout", d.ShutdownTimeout, time.Second, set.ShutdownTimeout, kept.ShutdownTimeout},
	} {
		if c.got != c.want {
			t.Errorf("default %s = %v, want %v", c.field, c.got, c.want)
		}
		if c.own != c.given {
			t.Errorf("WithDefaults made the %s set, %v, %v", c.field, c.given, c.own)
		}
	}
}

// Guarantee: a Server's write timeout is, by default, twice its
// Observer's StatsTimeout (the longest a /metrics scrape waits for the
// gathering) plus 10s to write the answer, whatever the StatsTimeout; a
// WriteTimeout given is used as it is.
func TestTheDefaultWriteTimeoutFollowsTheObserversStatsTimeout(t *testing.T) {
	for _, c := range []struct {
		stats, write, want time.Duration
	}{
		{0, 0, 2*observe.DefaultStatsTimeout + 10*time.Second},
		{3 * time.Second, 0, 16 * time.Second},
		{observe.MaxStatsTimeout, 0, 2*observe.MaxStatsTimeout + 10*time.Second},
		{3 * time.Second, 2 * time.Second, 2 * time.Second},
	} {
		obs := observe.New(observe.Options{StatsTimeout: c.stats})
		s := startServer(t, obs, observe.ServerOptions{WriteTimeout: c.write})
		if got := observe.WriteTimeout(s); got != c.want {
			t.Errorf("StatsTimeout %v, WriteTimeout %v: the server writes within %v, want %v", c.stats, c.write, got, c.want)
		}
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// Guarantee: a Server without a Logger of its own logs to its Observer's
// logger, so that a program that gives observe.Options a logger finds the
// line saying where the endpoints are served there, not on slog.Default().
func TestServeWithoutALoggerLogsToTheObserversLogger(t *testing.T) {
	var lines logtest.Lines
	obs := observe.New(observe.Options{Logger: slog.New(slog.NewTextHandler(&lines, nil))})
	s, err := obs.Serve(context.Background(), observe.ServerOptions{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close(context.Background()) }()
	if n := lines.Count(`msg="serving the observer's endpoints"`, "addr="+s.Addr()); n != 1 {
		t.Fatalf("the Observer's logger got %d lines saying where the endpoints are served, want 1: %q", n, lines.All())
	}
}

// Guarantee: an Observer and a Server without a Logger log to
// slog.Default(), never nowhere.
func TestServeWithoutAnyLoggerLogsToTheDefaultLogger(t *testing.T) {
	lines := logtest.CaptureDefault(t)
	s, err := observe.New(observe.Options{}).Serve(context.Background(), observe.ServerOptions{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close(context.Background()) }()
	lines.Want(t, 1, "lines on slog.Default() saying where the endpoints are served", `msg="serving the observer's endpoints"`, "addr="+s.Addr())
}

// Guarantee: Close with a context ended with a cause returns an error
// wrapping both the context's error and the cause, as the Observer's
// calls do.
func TestCloseWithAContextEndedWithACauseWrapsTheCause(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errShutdown)
	if err := closeBlocked(ctx, t, observe.MaxShutdownTimeout, 5*time.Second); !errors.Is(err, context.Canceled) || !errors.Is(err, errShutdown) {
		t.Errorf("Close = %v, want an error wrapping context.Canceled and the cause %v", err, errShutdown)
	}
}
