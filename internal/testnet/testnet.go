// Package testnet holds network fixtures shared by the sources' tests.
package testnet

import (
	"net"
	"sync"
	"testing"
	"time"
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

// Garbage is what GarbageListener writes on each connection: no protocol's
// answer (its first four bytes, read as a Kafka or Pulsar frame size, ask
// for about 2 GiB).
const Garbage = "\x7f\xff\xff\xfenot a broker\r\n"

// GarbageListener listens on 127.0.0.1 and, on every TCP connection it
// accepts, waits for the client's first bytes (at most a second), answers
// Garbage and closes the connection, as a port held by something other
// than a broker does; it returns the address. The listener and its
// goroutines are closed and awaited at t's cleanup.
func GarbageListener(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(time.Second))
				var b [512]byte
				_, _ = c.Read(b[:])
				_, _ = c.Write([]byte(Garbage))
			})
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}
