// Package kafkaconn dials sarama's connections to the brokers through a set
// that can cut them all at once: sarama waits for a broker's answer holding
// the broker's lock, a wait bounded only by Net.ReadTimeout, and nothing
// else interrupts it (nor a connection attempt, which holds that lock too,
// up to Net.DialTimeout), so a Close that must return by its context's
// deadline cuts the connections, and the attempts under way, when the
// context ends. Probe checks, before a client starts, that a bootstrap
// broker answers, within a timeout and a context's deadline.
package kafkaconn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// ErrCut is what a Set's dials fail with once it was cut.
var ErrCut = errors.New("kafka: connections cut: closing past its deadline")

// Set dials the connections of sarama clients to the brokers, through the
// dialer sarama would use (the configured proxy, else a net.Dialer with the
// Net.DialTimeout, KeepAlive and LocalAddr settings), and keeps them until
// they close, so that they can be cut at once. Once cut, the set refuses
// new dials, so that the last requests of a closing client (a leave, a
// final commit) fail at once instead of connecting again.
//
// A dial under way when the set is cut ends at once: with a dialer that
// takes a context (a net.Dialer, a configured dialer with a DialContext
// method) the dial is cancelled; a configured dialer without one is left
// to return on a goroutine of its own, which closes the connection it
// makes then.
//
// sarama checks the socket of an idle connection for errors only when it
// is a *net.TCPConn; through the set it learns of a dead connection from
// its next request instead, and connects again.
type Set struct {
	dial    func(network, addr string) (net.Conn, error)
	dialCtx func(ctx context.Context, network, addr string) (net.Conn, error) // used instead of dial when set

	mu    sync.Mutex
	cut   bool
	conns map[*setConn]struct{}
	// cutCtx ends when the set is cut (cancelCut); nil until a dial
	// needs it.
	cutCtx    context.Context
	cancelCut context.CancelFunc
}

// contextDialer is a dialer that takes a context.
type contextDialer interface {
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}

// New returns a set that dials as cfg says; cfg's own dialer, if any, is
// kept and wrapped. Use makes a config dial through the set.
func New(cfg *sarama.Config) *Set {
	s := &Set{conns: map[*setConn]struct{}{}}
	if cfg.Net.Proxy.Enable && cfg.Net.Proxy.Dialer != nil {
		s.dial = cfg.Net.Proxy.Dialer.Dial
		if d, ok := cfg.Net.Proxy.Dialer.(contextDialer); ok {
			s.dialCtx = d.DialContext
		}
	} else {
		d := &net.Dialer{Timeout: cfg.Net.DialTimeout, KeepAlive: cfg.Net.KeepAlive, LocalAddr: cfg.Net.LocalAddr}
		s.dial, s.dialCtx = d.Dial, d.DialContext
	}
	return s
}

// Child returns a copy of cfg that dials through a set of its own, and
// that set, which dials through s: cutting s cuts the child's connections
// too, and cutting the child cuts only its own, so that one client of
// several (a subscriber's, a reader's) can be cut short alone. The copy's
// retry backoffs are cfg's until the child is cut, and zero after (see
// SkipBackoffsOnceCut).
func (s *Set) Child(cfg *sarama.Config) (*sarama.Config, *Set) {
	c := &Set{dial: s.Dial, dialCtx: s.DialContext, conns: map[*setConn]struct{}{}}
	cp := *cfg
	c.Use(&cp)
	c.SkipBackoffsOnceCut(&cp)
	return &cp, c
}

// SkipBackoffsOnceCut makes sarama's retries of metadata, coordinator
// and offset lookups (Metadata.Retry), of a partition's fetches
// (Consumer.Retry) and of a producer's sends (Producer.Retry) of a client
// of cfg wait no backoff once s is cut: every attempt then fails at once,
// and sarama sleeps its backoff between them without a context (a
// coordinator lookup sleeps it up to Metadata.Retry.Max times, and an
// offset lookup repeats that lookup as often), which would hold a Close
// that cut the connections long past its deadline. Until then each
// backoff is cfg's: its BackoffFunc when set, else its Backoff.
func (s *Set) SkipBackoffsOnceCut(cfg *sarama.Config) {
	cfg.Metadata.Retry.BackoffFunc = s.backoff(cfg.Metadata.Retry.Backoff, cfg.Metadata.Retry.BackoffFunc)
	cfg.Producer.Retry.BackoffFunc = s.backoff(cfg.Producer.Retry.Backoff, cfg.Producer.Retry.BackoffFunc)
	var fetchFunc func(retries, maxRetries int) time.Duration
	if f := cfg.Consumer.Retry.BackoffFunc; f != nil {
		fetchFunc = func(retries, _ int) time.Duration { return f(retries) }
	}
	fetch := s.backoff(cfg.Consumer.Retry.Backoff, fetchFunc)
	cfg.Consumer.Retry.BackoffFunc = func(retries int) time.Duration { return fetch(retries, 0) }
}

// backoff is a retry's backoff of s: zero once s is cut, else fn's when
// fn is set, else d.
func (s *Set) backoff(d time.Duration, fn func(retries, maxRetries int) time.Duration) func(retries, maxRetries int) time.Duration {
	return func(retries, maxRetries int) time.Duration {
		switch {
		case s.isCut():
			return 0
		case fn != nil:
			return fn(retries, maxRetries)
		default:
			return d
		}
	}
}

// Use makes cfg dial through s.
func (s *Set) Use(cfg *sarama.Config) {
	cfg.Net.Proxy.Enable = true
	cfg.Net.Proxy.Dialer = s
}

// Dial implements the dialer sarama takes in Net.Proxy.Dialer.
func (s *Set) Dial(network, addr string) (net.Conn, error) {
	return s.DialContext(context.Background(), network, addr)
}

// DialContext is Dial within ctx.
func (s *Set) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if s.isCut() {
		return nil, ErrCut
	}
	var c net.Conn
	var err error
	if s.dialCtx != nil {
		dctx, cancel := context.WithCancel(ctx)
		stop := context.AfterFunc(s.cutContext(), cancel)
		c, err = s.dialCtx(dctx, network, addr)
		stop()
		cancel()
	} else {
		c, err = s.dialAside(ctx, network, addr)
	}
	if err != nil {
		if s.isCut() && !errors.Is(err, ErrCut) {
			return nil, fmt.Errorf("%w: %w", ErrCut, err)
		}
		return nil, err
	}
	sc := &setConn{Conn: c, set: s}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cut {
		_ = c.Close()
		return nil, ErrCut
	}
	s.conns[sc] = struct{}{}
	return sc, nil
}

// dialAside dials with s.dial, which takes no context, on a goroutine of
// its own, and returns what it returns, or ctx's error once ctx ends, or
// ErrCut once s is cut, whichever comes first: the dial is then left to
// return on its own, and the goroutine closes the connection it makes.
func (s *Set) dialAside(ctx context.Context, network, addr string) (net.Conn, error) {
	type dialed struct {
		c   net.Conn
		err error
	}
	got, gone := make(chan dialed), make(chan struct{})
	go func() {
		c, err := s.dial(network, addr)
		select {
		case got <- dialed{c, err}:
		case <-gone:
			if c != nil {
				_ = c.Close()
			}
		}
	}()
	select {
	case d := <-got:
		return d.c, d.err
	case <-ctx.Done():
		close(gone)
		return nil, ctx.Err()
	case <-s.cutContext().Done():
		close(gone)
		return nil, ErrCut
	}
}

// cutContext returns a context that ends when s is cut.
func (s *Set) cutContext() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cutCtx == nil {
		s.cutCtx, s.cancelCut = context.WithCancel(context.Background())
		if s.cut {
			s.cancelCut()
		}
	}
	return s.cutCtx
}

func (s *Set) isCut() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cut
}

// Cut closes every connection of the set and refuses new ones.
func (s *Set) Cut() {
	s.mu.Lock()
	s.cut = true
	if s.cancelCut != nil {
		s.cancelCut()
	}
	cs := make([]*setConn, 0, len(s.conns))
	for c := range s.conns {
		cs = append(cs, c)
	}
	clear(s.conns)
	s.mu.Unlock()
	for _, c := range cs {
		_ = c.Conn.Close()
	}
}

// CutWhenDone arms a cut of s for when ctx ends. The stop it returns
// disarms it and reports whether it did; when the cut has begun (false),
// stop returns once the cut has ended, so that nothing the arming started
// is still running. Calling stop again returns its first result.
func (s *Set) CutWhenDone(ctx context.Context) (stop func() bool) {
	done := make(chan struct{})
	return waitedStop(context.AfterFunc(ctx, func() { defer close(done); s.Cut() }), done)
}

// CutAfter arms a cut of s for d from now; its stop is CutWhenDone's.
func (s *Set) CutAfter(d time.Duration) (stop func() bool) {
	done := make(chan struct{})
	return waitedStop(time.AfterFunc(d, func() { defer close(done); s.Cut() }).Stop, done)
}

// waitedStop is disarm, reporting whether it stopped a callback from
// running, that also waits, when it did not, for the callback to close
// done. Its first result is kept: a later call disarms nothing.
func waitedStop(disarm func() bool, done <-chan struct{}) func() bool {
	return sync.OnceValue(func() bool {
		if disarm() {
			return true
		}
		<-done
		return false
	})
}

// Len returns how many connections the set holds open.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// setConn is a connection of a Set, which it leaves when closed. A read
// or write that fails once the set was cut fails with an error wrapping
// ErrCut (and the connection's own error), so that a request in flight
// when Cut closed its connection says it was cut, as a dial after the cut
// does.
type setConn struct {
	net.Conn
	set *Set
}

func (c *setConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	return n, c.cutErr(err)
}

func (c *setConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	return n, c.cutErr(err)
}

// cutErr is err, wrapped with ErrCut when the set was cut.
func (c *setConn) cutErr(err error) error {
	if err == nil || errors.Is(err, ErrCut) || !c.set.isCut() {
		return err
	}
	return fmt.Errorf("%w: %w", ErrCut, err)
}

func (c *setConn) Close() error {
	c.set.mu.Lock()
	delete(c.set.conns, c)
	c.set.mu.Unlock()
	return c.Conn.Close()
}
