// Package monitor gives every example the same two flags: -http, to serve
// the metrics, health checks and live dashboard of package observe while
// the example runs, and -linger, to keep serving them after its run ends.
// The server bounds what a client can hold (a slow or silent request, an
// answer nobody reads, an idle keep-alive connection; see serverLimits),
// and Server.Close ends every connection within its own bound.
package monitor

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/boulevard-go/boulevard/internal/loopback"
	"github.com/boulevard-go/boulevard/observe"
)

// Flags are the values of -http and -linger.
type Flags struct {
	// HTTP is the address to serve on, "" for none (the default). The
	// endpoints have no access control, so an address without a host
	// (":8080") listens on the loopback interface, 127.0.0.1, only; name
	// a host to listen elsewhere ("0.0.0.0:8080" for every interface).
	HTTP string
	// Linger is how long to keep serving after the run; see Forever.
	Linger Linger
	// limits replaces serverLimits when set (tests use shorter bounds).
	limits *limits
}

// Register defines -http and -linger on fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.HTTP, "http", "", "serve /metrics, /healthz, /readyz, /stats and /dashboard on this address while the example runs, e.g. 127.0.0.1:8080 (off by default; without a host, :8080, on 127.0.0.1 only)")
	fs.Var(&f.Linger, "linger", "with -http, keep serving after the run: -linger alone until interrupted (Ctrl-C), -linger=30s for that long")
}

// Forever is the Linger of a bare -linger: until interrupted.
const Forever Linger = -1

// Linger is how long to keep serving after the run: 0 not at all, Forever
// until the context ends. As a flag it is a boolean flag that also takes
// a duration.
type Linger time.Duration

// String formats l for flag's usage output.
func (l *Linger) String() string {
	switch {
	case l == nil || *l == 0:
		return "0s"
	case *l == Forever:
		return "true"
	}
	return time.Duration(*l).String()
}

// Set parses "true", "false" or a duration.
func (l *Linger) Set(s string) error {
	if b, err := strconv.ParseBool(s); err == nil {
		*l = 0
		if b {
			*l = Forever
		}
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return fmt.Errorf("want true, false or a duration ≥ 0, got %q", s)
	}
	*l = Linger(d)
	return nil
}

// IsBoolFlag lets -linger be given without a value.
func (l *Linger) IsBoolFlag() bool { return true }

// Server serves an Observer's handler.
type Server struct {
	// Addr is the address it listens on (with the port the system chose
	// for ":0").
	Addr   string
	srv    *http.Server
	done   chan struct{}
	linger Linger
	out    io.Writer
	lim    limits
	conns  connCount
}

// Serve starts serving obs's handler on f.HTTP (on 127.0.0.1 when it names
// no host) and prints where to stdout. It returns nil and serves nothing
// when f.HTTP is "".
func (f Flags) Serve(obs *observe.Observer, stdout io.Writer) (*Server, error) {
	if f.HTTP == "" {
		return nil, nil
	}
	l, err := net.Listen("tcp", loopback.Addr(f.HTTP))
	if err != nil {
		return nil, fmt.Errorf("-http: %w", err)
	}
	lim := serverLimits
	if f.limits != nil {
		lim = *f.limits
	}
	s := &Server{Addr: l.Addr().String(), done: make(chan struct{}), linger: f.Linger, out: stdout, lim: lim}
	s.srv = &http.Server{
		Handler:           obs.Handler(nil),
		ReadHeaderTimeout: lim.readHeader,
		ReadTimeout:       lim.read,
		WriteTimeout:      lim.write,
		IdleTimeout:       lim.idle,
		MaxHeaderBytes:    lim.maxHeaderBytes,
		ConnState:         s.conns.hook,
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(stdout, "serving metrics:", err)
		}
	}()
	fmt.Fprintf(stdout, "metrics on http://%s/metrics, health on /healthz and /readyz, dashboard on http://%s/dashboard\n", s.Addr, s.Addr)
	return s, nil
}

// Close keeps serving as long as -linger says (until ctx ends for a bare
// -linger, at most the given duration otherwise), then stops the server:
// it lets the requests being handled finish for 1 s at most, then closes
// every connection left (one whose client does not read its answer, or
// sends its request slowly), and waits 1 s at most for their handlers to
// return. It returns 2 s after the linger at most, and says so on the
// Serve's stdout when a handler has still not returned then (a /metrics
// scrape whose gathering ignores the closed connection until its own
// bound). A nil Server does nothing.
func (s *Server) Close(ctx context.Context) {
	if s == nil {
		return
	}
	if s.linger != 0 && ctx.Err() == nil {
		wait := ctx
		if s.linger != Forever {
			var cancel context.CancelFunc
			wait, cancel = context.WithTimeout(ctx, time.Duration(s.linger))
			defer cancel()
			fmt.Fprintf(s.out, "still serving on http://%s for %s (-linger)\n", s.Addr, time.Duration(s.linger))
		} else {
			fmt.Fprintf(s.out, "still serving on http://%s until interrupted (-linger)\n", s.Addr)
		}
		<-wait.Done()
	}
	s.stop()
}

// stop shuts the server down within s.lim.shutdown, then closes what is
// left and waits s.lim.closeWait at most for the connections to end.
func (s *Server) stop() {
	sctx, cancel := context.WithTimeout(context.Background(), s.lim.shutdown)
	defer cancel()
	if err := s.srv.Shutdown(sctx); err != nil {
		_ = s.srv.Close()
	}
	<-s.done // Serve returns once the listener is closed, which Shutdown does first
	t := time.NewTimer(s.lim.closeWait)
	defer t.Stop()
	select {
	case <-s.conns.allClosed():
	case <-t.C:
		fmt.Fprintf(s.out, "stopped serving on http://%s with %d connection(s) still being answered\n", s.Addr, s.conns.open())
	}
}
