package observe

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/boulevard-go/boulevard/internal/loopback"
	"github.com/boulevard-go/boulevard/validate"
)

// The defaults of ServerOptions, chosen for what Observer.Handler serves.
const (
	// DefaultReadHeaderTimeout is the default ServerOptions.ReadHeaderTimeout.
	DefaultReadHeaderTimeout = 5 * time.Second
	// DefaultReadTimeout is the default ServerOptions.ReadTimeout: no
	// endpoint takes a body, so this only bounds a client sending one.
	DefaultReadTimeout = 10 * time.Second
	// DefaultIdleTimeout is the default ServerOptions.IdleTimeout, well
	// past the one-second polls of the dashboard and of a scraper set to
	// scrape every second.
	DefaultIdleTimeout = 30 * time.Second
	// DefaultMaxHeaderBytes is the default ServerOptions.MaxHeaderBytes:
	// more than a browser sends, cookies included.
	DefaultMaxHeaderBytes = 64 << 10
	// DefaultShutdownTimeout is the default ServerOptions.ShutdownTimeout.
	DefaultShutdownTimeout = time.Second
	// writeMargin is what the default ServerOptions.WriteTimeout leaves
	// beyond the longest wait of a /metrics scrape (twice
	// Options.StatsTimeout) to write the answer.
	writeMargin = 10 * time.Second
)

// The upper bounds of ServerOptions, which Validate checks.
const (
	// MaxServerTimeout bounds every timeout of ServerOptions but
	// ShutdownTimeout: it leaves the longest /metrics scrape (twice
	// MaxStatsTimeout) time to answer.
	MaxServerTimeout = 5 * time.Minute
	// MaxShutdownTimeout bounds ServerOptions.ShutdownTimeout.
	MaxShutdownTimeout = time.Minute
	// MaxServerHeaderBytes bounds ServerOptions.MaxHeaderBytes (net/http's
	// own default).
	MaxServerHeaderBytes = 1 << 20
)

// ErrRequestsPending is wrapped by the error of Server.Close when
// requests are still being handled once Close has closed their
// connections and waited ShutdownTimeout more for them: a /metrics scrape
// whose gathering waits for a collector (at most twice
// Options.StatsTimeout for the Observer's own series, see
// Observer.Handler). Their goroutines end when the handler returns.
var ErrRequestsPending = errors.New("observe: requests still being handled")

// ServerOptions configures the server Observer.Serve starts. Only Addr is
// required; every zero value means its default.
type ServerOptions struct {
	// Addr is the TCP address to listen on, "host:port". Required. The
	// endpoints have no access control, so an address without a host
	// (":9090") listens on the loopback interface, 127.0.0.1, only; name
	// a host to listen elsewhere ("0.0.0.0:9090" for every interface).
	// Port 0 lets the system choose one: Server.Addr tells which.
	Addr string `validate:"required"`
	// Gatherer is what /metrics serves, as the argument of
	// Observer.Handler: usually the registry the Observer is registered
	// on, with the program's own collectors. Nil means a registry of the
	// Observer alone.
	Gatherer prometheus.Gatherer `name:"-"`
	// ReadHeaderTimeout bounds reading a request's header, from the moment
	// the server waits for it. 0 means DefaultReadHeaderTimeout (5s); at
	// most MaxServerTimeout (5m).
	ReadHeaderTimeout time.Duration `validate:"gte=0,lte=5m"`
	// ReadTimeout bounds reading a whole request, header and body. No
	// endpoint takes a body: this bounds a client that sends one slowly
	// (the server reads what the handler left, to keep the connection).
	// 0 means DefaultReadTimeout (10s); at most MaxServerTimeout (5m).
	ReadTimeout time.Duration `validate:"gte=0,lte=5m"`
	// WriteTimeout bounds an answer, from the end of its request's header
	// to its last byte written, the handler's work included: a client
	// that does not read its answer loses its connection then. 0 means
	// twice the Observer's Options.StatsTimeout, which a /metrics scrape
	// may wait for the gathering, plus 10s to write the answer (20s with
	// the default StatsTimeout); Serve sets it, as it depends on the
	// Observer. At most MaxServerTimeout (5m).
	WriteTimeout time.Duration `validate:"gte=0,lte=5m"`
	// IdleTimeout is how long a keep-alive connection may wait for its
	// next request. 0 means DefaultIdleTimeout (30s); at most
	// MaxServerTimeout (5m).
	IdleTimeout time.Duration `validate:"gte=0,lte=5m"`
	// MaxHeaderBytes bounds a request's header; a larger one is refused
	// with 431. 0 means DefaultMaxHeaderBytes (64 KiB); at most
	// MaxServerHeaderBytes (1 MiB).
	MaxHeaderBytes int `validate:"gte=0,lte=1048576"`
	// ShutdownTimeout is how long Server.Close lets the requests being
	// handled finish before it closes every connection left (a client
	// that does not read, or sends slowly, included), and how long it
	// then waits, at most, for their handlers to return: Close returns
	// within twice ShutdownTimeout. 0 means DefaultShutdownTimeout (1s);
	// at most MaxShutdownTimeout (1m).
	ShutdownTimeout time.Duration `validate:"gte=0,lte=1m"`
	// Logger receives one line when serving starts, with the address, and
	// one when serving ends with an error (an accept that fails for
	// good), and net/http's own errors. Nil means the Observer's logger
	// (Options.Logger) for Serve, and slog.Default() for WithDefaults
	// called alone.
	Logger *slog.Logger `name:"-"`
}

// WithDefaults returns o with each zero value replaced by its default,
// but WriteTimeout, whose default depends on the Observer (Serve sets
// it), and with a nil Logger replaced by slog.Default() (Serve gives the
// Observer's first).
func (o ServerOptions) WithDefaults() ServerOptions {
	o.ReadHeaderTimeout = cmp.Or(o.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	o.ReadTimeout = cmp.Or(o.ReadTimeout, DefaultReadTimeout)
	o.IdleTimeout = cmp.Or(o.IdleTimeout, DefaultIdleTimeout)
	o.MaxHeaderBytes = cmp.Or(o.MaxHeaderBytes, DefaultMaxHeaderBytes)
	o.ShutdownTimeout = cmp.Or(o.ShutdownTimeout, DefaultShutdownTimeout)
	o.Logger = cmp.Or(o.Logger, slog.Default())
	return o
}

// Validate returns nil or a validate.Errors naming every broken rule
// ("observe.server.addr is required").
func (o ServerOptions) Validate() error { return validate.Struct("observe.server", &o) }

// Server serves an Observer's endpoints (see Observer.Handler) on an
// address of its own. Observer.Serve starts it; Close stops it.
type Server struct {
	addr     string
	log      *slog.Logger
	shutdown time.Duration
	srv      *http.Server
	// served is closed once the serving goroutine has returned.
	served chan struct{}
	conns  connCount
}

// Serve validates opts, listens on opts.Addr at once, and serves the
// Observer's handler there (Handler(opts.Gatherer)) on a goroutine of the
// Server's own until Close. A bad option, or an address that cannot be
// listened on (a port in use, an address that does not parse), is
// returned here, and nothing is left running. ctx bounds the listen (a
// host name's lookup): once Serve has returned, the Server serves until
// Close, whatever becomes of ctx, so that a program still answers its
// health checks while it drains after a signal. Once the Observer's Close
// is called, Serve starts nothing and returns ErrClosed (a Server started
// before goes on serving until its own Close). A nil ctx returns
// ErrNilContext, nothing listened on.
func (o *Observer) Serve(ctx context.Context, opts ServerOptions) (*Server, error) {
	if ctx == nil {
		return nil, ErrNilContext
	}
	if o.calls.isClosed() {
		return nil, ErrClosed
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.Logger = cmp.Or(opts.Logger, o.log)
	opts = opts.WithDefaults()
	opts.WriteTimeout = cmp.Or(opts.WriteTimeout, 2*o.timeout+writeMargin)
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", loopback.Addr(opts.Addr))
	if err != nil {
		return nil, fmt.Errorf("observe: serving on %q: %w", opts.Addr, err)
	}
	s := &Server{
		addr:     l.Addr().String(),
		log:      opts.Logger,
		shutdown: opts.ShutdownTimeout,
		served:   make(chan struct{}),
	}
	s.srv = &http.Server{
		Handler:           o.Handler(opts.Gatherer),
		ReadHeaderTimeout: opts.ReadHeaderTimeout,
		ReadTimeout:       opts.ReadTimeout,
		WriteTimeout:      opts.WriteTimeout,
		IdleTimeout:       opts.IdleTimeout,
		MaxHeaderBytes:    opts.MaxHeaderBytes,
		ConnState:         s.conns.hook,
		ErrorLog:          slog.NewLogLogger(opts.Logger.Handler(), slog.LevelWarn),
	}
	s.log.Info("serving the observer's endpoints", "addr", s.addr)
	go func() {
		defer close(s.served)
		if err := s.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("serving the observer's endpoints ended", "addr", s.addr, "error", err)
		}
	}()
	return s, nil
}

// Addr returns the address the Server listens on, with the port the
// system chose for port 0 ("127.0.0.1:41234").
func (s *Server) Addr() string { return s.addr }

// Close stops the Server: it stops listening, lets the requests being
// handled finish for ServerOptions.ShutdownTimeout at most, then closes
// every connection left (a client that does not read its answer, or
// sends its request slowly, an idle keep-alive connection), and waits
// ShutdownTimeout more at most for the handlers of those connections to
// return. It returns nil once every connection has ended; an error
// wrapping ErrRequestsPending when handlers still run after that wait;
// and, when ctx ends first, an error wrapping ctx.Err() (and ctx's cause,
// when it was given one) at once, the connections closed all the same.
// The serving goroutine has returned whenever Close returns nil. Close
// may be called more than once, and concurrently: each call stops the
// Server the same way, and returns once it is stopped. On a Server
// Observer.Serve did not make (a zero value), which serves nothing, Close
// returns nil. A nil ctx is a context that never ends: the Server is
// stopped all the same, within the ShutdownTimeout bounds above.
func (s *Server) Close(ctx context.Context) error {
	if s.srv == nil {
		return nil
	}
	if ctx == nil {
		ctx = context.Background()
	}
	sctx, cancel := context.WithTimeout(ctx, s.shutdown)
	defer cancel()
	_ = s.srv.Shutdown(sctx) // stops listening first; its error is sctx's
	_ = s.srv.Close()        // every connection Shutdown left
	cutShort := func() error { return fmt.Errorf("observe: closing the server on %s: %w", s.addr, ended(ctx)) }
	if ctx.Err() != nil {
		return cutShort()
	}
	t := time.NewTimer(s.shutdown)
	defer t.Stop()
	wait := func(done <-chan struct{}) error {
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return cutShort()
		case <-t.C:
			return fmt.Errorf("%w: closing the server on %s, %d connection(s) still being answered", ErrRequestsPending, s.addr, s.conns.open())
		}
	}
	if err := wait(s.served); err != nil {
		return err
	}
	// A connection accepted as the listener closed is counted before Serve
	// returns, but may have escaped the Close above.
	_ = s.srv.Close()
	return wait(s.conns.allClosed())
}

// connCount counts a server's open connections, through its ConnState
// hook, so that Close can wait until the last one has ended.
type connCount struct {
	mu sync.Mutex
	n  int
	// zero, once allClosed made it, is closed when n is 0.
	zero     chan struct{}
	zeroDone bool
}

// hook is the server's ConnState.
func (c *connCount) hook(_ net.Conn, st http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch st {
	case http.StateNew:
		c.n++
	case http.StateClosed, http.StateHijacked:
		c.n--
		c.closeZero()
	}
}

// closeZero closes zero if it is made, still open, and n is 0. c.mu is
// held.
func (c *connCount) closeZero() {
	if c.n == 0 && c.zero != nil && !c.zeroDone {
		close(c.zero)
		c.zeroDone = true
	}
}

// open returns the number of open connections.
func (c *connCount) open() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// allClosed returns a channel closed once no connection is open. Call it
// once the server accepts no more connections (Serve has returned): the
// channel is made once, and closed the first time the count is 0.
func (c *connCount) allClosed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.zero == nil {
		c.zero = make(chan struct{})
	}
	c.closeZero()
	return c.zero
}
