// Package testnet holds network fixtures shared by the sources' tests.
package testnet

import (
	"net"
	"sync"
	"testing"
)

// SilentListener listens on 127.0.0.1, accepts every TCP connection and
// never answers on it, as a broker that hangs does; it returns the address.
// The listener, its accepting goroutine and every accepted connection are
// closed and awaited at t's cleanup.
func SilentListener(t testing.TB) string {
	t.Helper()
	addr, _ := SilentListenerAccepting(t)
	return addr
}

// SilentListenerAccepting is SilentListener that also returns a channel
// closed once it has accepted its first connection.
func SilentListenerAccepting(t testing.TB) (addr string, accepted <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	first := make(chan struct{})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if len(conns) == 0 {
				close(first)
			}
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String(), first
}

// ClosedPort returns an address on 127.0.0.1 where nothing listens: a
// connection to it is refused, as by a broker that is down.
func ClosedPort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
