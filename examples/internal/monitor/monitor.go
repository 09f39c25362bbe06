// Package monitor gives every example the same two flags: -http, to serve
// the metrics, health checks and live dashboard of package observe while
// the example runs, and -linger, to keep serving them after its run ends.
// The server is observe's (Observer.Serve) with its default bounds on
// what a client can hold, and Server.Close ends every connection within
// its ShutdownTimeout.
package monitor

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/boulevard-go/boulevard/observe"
)

// Flags are the values of -http and -linger.
type Flags struct {
	// HTTP is the address to serve on, "" for none (the default). The
	// endpoints have no access control, so an address without a host
	// (":2112") listens on the loopback interface, 127.0.0.1, only; name
	// a host to listen elsewhere ("0.0.0.0:2112" for every interface).
	HTTP string
	// Linger is how long to keep serving after the run; see Forever.
	Linger Linger
}

// Register defines -http and -linger on fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.HTTP, "http", "", "serve /metrics, /healthz, /readyz, /stats and /dashboard on this address while the example runs, e.g. 127.0.0.1:2112 (off by default; without a host, :2112, on 127.0.0.1 only)")
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
	srv    *observe.Server
	linger Linger
	out    io.Writer
}

// Serve starts serving obs's handler on f.HTTP (on 127.0.0.1 when it names
// no host) and prints where to stdout; ctx bounds the listen. It returns
// nil and serves nothing when f.HTTP is "".
func (f Flags) Serve(ctx context.Context, obs *observe.Observer, stdout io.Writer) (*Server, error) {
	if f.HTTP == "" {
		return nil, nil
	}
	srv, err := obs.Serve(ctx, observe.ServerOptions{Addr: f.HTTP})
	if err != nil {
		return nil, fmt.Errorf("-http: %w", err)
	}
	s := &Server{Addr: srv.Addr(), srv: srv, linger: f.Linger, out: stdout}
	fmt.Fprintf(stdout, "metrics on http://%s/metrics, health on /healthz and /readyz, stats on /stats, dashboard on http://%s/dashboard\n", s.Addr, s.Addr)
	return s, nil
}

// Close keeps serving as long as -linger says (until ctx ends for a bare
// -linger, at most the given duration otherwise), then stops the server
// (observe.Server.Close with the default ShutdownTimeout: it returns 2 s
// after the linger at most), and says so on the Serve's stdout when a
// request was still being answered then (a /metrics scrape whose
// gathering ignores the closed connection until its own bound). A nil
// Server does nothing.
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
	// ctx has often ended (the interrupt that stopped the run): the
	// server's own bound applies.
	if err := s.srv.Close(context.WithoutCancel(ctx)); err != nil {
		fmt.Fprintln(s.out, "stopped serving:", err)
	}
}
