package kafkaconn

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/testnet"
)

// Guarantee: a set holds only open connections (one
// closed by sarama leaves it, so reconnections do not grow it), and
// cutting it fails a read in progress at once and refuses new dials.
func TestCutClosesEveryConnection(t *testing.T) {
	addr := testnet.SilentListener(t)
	cfg := sarama.NewConfig()
	s := New(cfg)
	s.Use(cfg)
	if !cfg.Net.Proxy.Enable || cfg.Net.Proxy.Dialer != s {
		t.Fatal("the config does not dial through the set")
	}
	closed, err := s.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	open, err := s.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.Len(); n != 1 {
		t.Fatalf("the set holds %d connections, want the 1 still open", n)
	}
	read := make(chan error, 1)
	go func() {
		_, err := open.Read(make([]byte, 1)) // the broker never answers
		read <- err
	}()
	s.Cut()
	select {
	case err := <-read:
		if err == nil || errors.Is(err, io.EOF) || !errors.Is(err, net.ErrClosed) || !errors.Is(err, ErrCut) {
			t.Fatalf("read on a cut connection = %v, want the closed connection's error, wrapped with ErrCut", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a read in progress outlived the cut")
	}
	if _, err := open.Write([]byte{1}); !errors.Is(err, net.ErrClosed) || !errors.Is(err, ErrCut) {
		t.Fatalf("write on a cut connection = %v, want the closed connection's error, wrapped with ErrCut", err)
	}
	if _, err := s.Dial("tcp", addr); !errors.Is(err, ErrCut) {
		t.Fatalf("dial after the cut = %v, want ErrCut", err)
	}
	if n := s.Len(); n != 0 {
		t.Fatalf("the set holds %d connections after the cut", n)
	}
}

// Guarantee: cutting a child set closes its connections only; cutting
// its parent closes the child's as well and refuses the child's dials.
func TestChildCutsItsOwnConnections(t *testing.T) {
	addr := testnet.SilentListener(t)
	parent := New(sarama.NewConfig())
	cfg := sarama.NewConfig()
	ccfg, child := parent.Child(cfg)
	_, other := parent.Child(cfg)
	if ccfg == cfg || ccfg.Net.Proxy.Dialer != child || !ccfg.Net.Proxy.Enable || cfg.Net.Proxy.Enable {
		t.Fatal("Child does not return a copy of the config that dials through the child, or changed the original")
	}
	c, err := child.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	o, err := other.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if n := parent.Len(); n != 2 {
		t.Fatalf("the parent holds %d connections, want its children's 2", n)
	}
	child.Cut()
	if _, err := c.Write([]byte{0}); err == nil {
		t.Fatal("a write on the cut child's connection succeeded")
	}
	if _, err := o.Write([]byte{0}); err != nil {
		t.Fatalf("the other child's connection was closed by the cut: %v", err)
	}
	if child.Len() != 0 || other.Len() != 1 || parent.Len() != 1 {
		t.Fatalf("after cutting one child: child %d, other %d, parent %d connections; want 0, 1, 1", child.Len(), other.Len(), parent.Len())
	}
	parent.Cut()
	if _, err := o.Write([]byte{0}); err == nil {
		t.Fatal("a write on a child's connection succeeded after its parent was cut")
	}
	if _, err := other.Dial("tcp", addr); !errors.Is(err, ErrCut) {
		t.Fatalf("a child's dial after its parent's cut = %v, want ErrCut", err)
	}
}

// Guarantee: a dialer the application configured (Net.Proxy) is kept:
// the set dials through it; one configured with Net.Proxy.Enable off is
// not used, the set dialing directly as sarama would.
func TestConfiguredDialerIsKeptOnlyWhenEnabled(t *testing.T) {
	addr := testnet.SilentListener(t)
	for _, enable := range []bool{true, false} {
		cfg := sarama.NewConfig()
		d := &countingDialer{}
		cfg.Net.Proxy.Enable, cfg.Net.Proxy.Dialer = enable, d
		s := New(cfg)
		s.Use(cfg)
		c, err := s.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
		if want := map[bool]int{true: 1, false: 0}[enable]; d.n != want {
			t.Fatalf("with Net.Proxy.Enable %t, the configured dialer dialed %d times, want %d", enable, d.n, want)
		}
	}
}

// Guarantee: a set once cut dials nothing, and a dial under way when the
// set is cut fails with ErrCut and closes the connection it made.
func TestACutSetDialsNothingAndClosesADialUnderWay(t *testing.T) {
	dials := 0
	var peer net.Conn
	var s *Set
	s = &Set{conns: map[*setConn]struct{}{}, dial: func(string, string) (net.Conn, error) {
		dials++
		c, p := net.Pipe()
		peer = p
		s.Cut() // the set is cut while the dial is under way
		return c, nil
	}}
	if c, err := s.Dial("tcp", "broker:9092"); !errors.Is(err, ErrCut) || c != nil {
		t.Fatalf("a dial cut under way = %v, %v; want ErrCut", c, err)
	}
	defer func() { _ = peer.Close() }()
	_ = peer.SetReadDeadline(time.Now().Add(10 * time.Second)) // an open connection reads nothing: no EOF
	if _, err := peer.Read(make([]byte, 1)); !errors.Is(err, io.EOF) || s.Len() != 0 {
		t.Fatalf("a dial cut under way left its connection open (read = %v) or %d held", err, s.Len())
	}
	if _, err := s.Dial("tcp", "broker:9092"); !errors.Is(err, ErrCut) || dials != 1 {
		t.Fatalf("a dial on a cut set = %v after %d dials, want ErrCut without dialing", err, dials)
	}
}

type countingDialer struct{ n int }

func (d *countingDialer) Dial(network, addr string) (net.Conn, error) {
	d.n++
	return net.Dial(network, addr)
}

// Guarantee: a config's retry backoffs are its own (its BackoffFunc when
// set, else its Backoff) until its set is cut, and nothing once it is:
// sarama's retries, which then fail at once, do not sleep.
func TestBackoffsAreTheConfigsUntilTheSetIsCut(t *testing.T) {
	byFunc := sarama.NewConfig()
	byFunc.Metadata.Retry.BackoffFunc = func(retries, maxRetries int) time.Duration {
		return time.Duration(retries*10+maxRetries) * time.Second
	}
	byFunc.Consumer.Retry.BackoffFunc = func(retries int) time.Duration { return time.Duration(retries) * time.Minute }
	byFunc.Producer.Retry.BackoffFunc = func(retries, maxRetries int) time.Duration {
		return time.Duration(retries+maxRetries) * time.Hour
	}
	byValue := sarama.NewConfig()
	byValue.Metadata.Retry.Backoff = 7 * time.Second
	byValue.Consumer.Retry.Backoff = 9 * time.Second
	byValue.Producer.Retry.Backoff = 11 * time.Second
	for _, c := range []struct {
		name                     string
		cfg                      *sarama.Config
		metadata, fetch, produce time.Duration // before the cut, at retry 2 of 3
	}{
		{"BackoffFunc", byFunc, 23 * time.Second, 2 * time.Minute, 5 * time.Hour},
		{"Backoff", byValue, 7 * time.Second, 9 * time.Second, 11 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := New(c.cfg)
			s.SkipBackoffsOnceCut(c.cfg)
			backoffs := func() (time.Duration, time.Duration, time.Duration) {
				return c.cfg.Metadata.Retry.BackoffFunc(2, 3), c.cfg.Consumer.Retry.BackoffFunc(2), c.cfg.Producer.Retry.BackoffFunc(2, 3)
			}
			if m, f, p := backoffs(); m != c.metadata || f != c.fetch || p != c.produce {
				t.Fatalf("backoffs before the cut = %v (metadata), %v (fetch), %v (produce); want %v, %v, %v", m, f, p, c.metadata, c.fetch, c.produce)
			}
			s.Cut()
			if m, f, p := backoffs(); m != 0 || f != 0 || p != 0 {
				t.Fatalf("backoffs once the set is cut = %v (metadata), %v (fetch), %v (produce); want 0", m, f, p)
			}
		})
	}
}

// Guarantee: a child's config keeps its parent config's retry backoffs
// until the child is cut, and has none once it is: sarama's retries of a
// client cut short alone (a subscriber's, a reader's), which then fail at
// once, do not sleep. Cutting the child leaves the parent's backoffs.
func TestAChildsBackoffsAreZeroOnceTheChildIsCut(t *testing.T) {
	cfg := sarama.NewConfig()
	cfg.Metadata.Retry.Backoff = 7 * time.Second
	cfg.Consumer.Retry.Backoff = 9 * time.Second
	parent := New(cfg)
	parent.SkipBackoffsOnceCut(cfg)
	child, s := parent.Child(cfg)
	backoffs := func(c *sarama.Config) (time.Duration, time.Duration) {
		return c.Metadata.Retry.BackoffFunc(2, 3), c.Consumer.Retry.BackoffFunc(2)
	}
	if m, f := backoffs(child); m != 7*time.Second || f != 9*time.Second {
		t.Fatalf("a child's backoffs before a cut = %v (metadata), %v (fetch); want 7s, 9s", m, f)
	}
	s.Cut()
	if m, f := backoffs(child); m != 0 || f != 0 {
		t.Fatalf("a child's backoffs once it is cut = %v (metadata), %v (fetch); want 0", m, f)
	}
	if m, f := backoffs(cfg); m != 7*time.Second || f != 9*time.Second {
		t.Fatalf("the parent's backoffs once a child is cut = %v (metadata), %v (fetch); want 7s, 9s", m, f)
	}
}

// Guarantee: a read or write on a cut set's connection that succeeds
// (one the connection completed as the cut came) is returned as it is:
// only a failed one says the cut failed it.
func TestAReadOrWriteThatSucceedsAsTheSetIsCutIsNoFailure(t *testing.T) {
	s := &Set{conns: map[*setConn]struct{}{}, dial: func(string, string) (net.Conn, error) { return steadyConn{}, nil }}
	c, err := s.Dial("tcp", "broker:9092")
	if err != nil {
		t.Fatal(err)
	}
	s.Cut()
	if n, err := c.Read(make([]byte, 4)); n != 4 || err != nil {
		t.Fatalf("a read that succeeded on a cut set's connection = %d, %v; want 4, nil", n, err)
	}
	if n, err := c.Write(make([]byte, 4)); n != 4 || err != nil {
		t.Fatalf("a write that succeeded on a cut set's connection = %d, %v; want 4, nil", n, err)
	}
}

// steadyConn is a connection whose reads and writes succeed, closed or
// not.
type steadyConn struct{ net.Conn }

func (steadyConn) Read(p []byte) (int, error)  { return len(p), nil }
func (steadyConn) Write(p []byte) (int, error) { return len(p), nil }
func (steadyConn) Close() error                { return nil }

// Guarantee: a read or write on a child's connection once both the child
// and its parent are cut fails with an error that says so once: the
// child's connection does not wrap ErrCut around its parent's, which
// already did.
func TestAConnectionOfAChildCutWithItsParentSaysItWasCutOnce(t *testing.T) {
	addr := testnet.SilentListener(t)
	parent := New(sarama.NewConfig())
	_, child := parent.Child(sarama.NewConfig())
	c, err := child.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	parent.Cut()
	child.Cut()
	if _, err := c.Write([]byte{1}); !errors.Is(err, ErrCut) || strings.Count(err.Error(), ErrCut.Error()) != 1 {
		t.Fatalf("a write on a connection of a child cut with its parent = %v; want the closed connection's error, wrapped with ErrCut once", err)
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, ErrCut) || strings.Count(err.Error(), ErrCut.Error()) != 1 {
		t.Fatalf("a read on a connection of a child cut with its parent = %v; want the closed connection's error, wrapped with ErrCut once", err)
	}
}

// hangingDialer connects nowhere: a dial waits until its context ends (as
// one to a broker whose address drops the connection attempt waits for
// Net.DialTimeout), or until release is closed.
type hangingDialer struct {
	started chan struct{} // takes one value as each dial starts
	release chan struct{}
}

func (d *hangingDialer) Dial(network, addr string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, addr)
}

func (d *hangingDialer) DialContext(ctx context.Context, _, _ string) (net.Conn, error) {
	d.started <- struct{}{}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-d.release:
		return nil, errors.New("released")
	}
}

// Guarantee: a dial under way as its set, or the set that set is a child
// of, is cut fails at once with ErrCut, when the dialer the set wraps
// takes a context (net.Dialer does): a broker that leaves the connection
// attempt unanswered holds no cut request, nor the Close waiting for it,
// until Net.DialTimeout.
func TestADialUnderWayEndsWhenItsSetIsCut(t *testing.T) {
	for _, cutParent := range []bool{false, true} {
		d := &hangingDialer{started: make(chan struct{}, 1), release: make(chan struct{})}
		t.Cleanup(func() { close(d.release) })
		cutDuringDial(t, d, d.started, cutParent)
	}
}

// cutDuringDial dials through the child of a set that dials with d, cuts
// the child, or its parent when cutParent, once started says the dial
// began, and fails t unless the dial then fails within 10 seconds with
// an error wrapping ErrCut that says once that it was cut. It returns the
// two sets.
func cutDuringDial(t *testing.T, d interface {
	Dial(network, addr string) (net.Conn, error)
}, started <-chan struct{}, cutParent bool) (parent, child *Set) {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Net.Proxy.Enable, cfg.Net.Proxy.Dialer = true, d
	parent = New(cfg)
	_, child = parent.Child(cfg)
	dialed := make(chan error, 1)
	go func() {
		_, err := child.Dial("tcp", "broker:9092")
		dialed <- err
	}()
	<-started
	if cutParent {
		parent.Cut()
	} else {
		child.Cut()
	}
	select {
	case err := <-dialed:
		if !errors.Is(err, ErrCut) {
			t.Errorf("a dial under way as its set was cut (the parent: %t) = %v, want ErrCut", cutParent, err)
		} else if n := strings.Count(err.Error(), ErrCut.Error()); n != 1 {
			t.Errorf("a dial under way as its set was cut (the parent: %t) = %q, which says it was cut %d times, want once", cutParent, err, n)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("a dial under way as its set was cut (the parent: %t) still runs 10s later", cutParent)
	}
	return parent, child
}
