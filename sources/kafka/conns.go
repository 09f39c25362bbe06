package kafka

import (
	"errors"
	"net"
	"sync"

	"github.com/IBM/sarama"
)

// errCut is what a member's dials fail with once its Close ran out of
// time.
var errCut = errors.New("kafka: the source is closing past its deadline")

// connSet dials a member's connections to the brokers, through the dialer
// sarama would use (the configured proxy, else a net.Dialer with the
// Net.DialTimeout, KeepAlive and LocalAddr settings), and keeps them until
// they close, so that a Close whose context ended can cut them: sarama
// holds a broker's lock while it waits for an answer, a wait bounded only
// by Net.ReadTimeout, and nothing else interrupts it. Once cut, the set
// refuses new dials, so that the member's last requests (the leave, a
// final commit) fail at once instead of connecting again.
//
// sarama checks the socket of an idle connection for errors only when it
// is a *net.TCPConn; through the set it learns of a dead connection from
// its next request instead, and connects again.
type connSet struct {
	dial func(network, addr string) (net.Conn, error)

	mu    sync.Mutex
	cut   bool
	conns map[*setConn]struct{}
}

// newConnSet returns the set that dials for cfg; cfg's own dialer is kept
// and wrapped, so it must not have been made the set's already.
func newConnSet(cfg *sarama.Config) *connSet {
	s := &connSet{conns: map[*setConn]struct{}{}}
	if cfg.Net.Proxy.Enable && cfg.Net.Proxy.Dialer != nil {
		s.dial = cfg.Net.Proxy.Dialer.Dial
	} else {
		d := &net.Dialer{Timeout: cfg.Net.DialTimeout, KeepAlive: cfg.Net.KeepAlive, LocalAddr: cfg.Net.LocalAddr}
		s.dial = d.Dial
	}
	return s
}

// use makes cfg dial through s.
func (s *connSet) use(cfg *sarama.Config) {
	cfg.Net.Proxy.Enable = true
	cfg.Net.Proxy.Dialer = s
}

// Dial implements the dialer sarama takes in Net.Proxy.Dialer.
func (s *connSet) Dial(network, addr string) (net.Conn, error) {
	if s.isCut() {
		return nil, errCut
	}
	c, err := s.dial(network, addr)
	if err != nil {
		return nil, err
	}
	sc := &setConn{Conn: c, set: s}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cut {
		_ = c.Close()
		return nil, errCut
	}
	s.conns[sc] = struct{}{}
	return sc, nil
}

func (s *connSet) isCut() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cut
}

// cutAll closes every connection of the set and refuses new ones.
func (s *connSet) cutAll() {
	s.mu.Lock()
	s.cut = true
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

// len returns how many connections the set holds open.
func (s *connSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// setConn is a connection of a connSet, which it leaves when closed.
type setConn struct {
	net.Conn
	set *connSet
}

func (c *setConn) Close() error {
	c.set.mu.Lock()
	delete(c.set.conns, c)
	c.set.mu.Unlock()
	return c.Conn.Close()
}
