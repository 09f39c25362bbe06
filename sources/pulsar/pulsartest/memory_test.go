package pulsartest

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
)

// heapAlloc returns the live heap after a collection.
func heapAlloc() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// partialFrame is a frame header declaring size bytes (command of cmd
// bytes) followed by one byte of it.
func partialFrame(size, cmd uint32) []byte {
	var b [9]byte
	binary.BigEndian.PutUint32(b[:4], size)
	binary.BigEndian.PutUint32(b[4:8], cmd)
	return b[:]
}

// The broker holds memory for the bytes a connection sent, not for the
// frame size it declared: 64 connections that each declare a large frame
// and send one byte of it, before and after CONNECT, leave the heap a few
// MiB larger at most (the declared sizes add up to hundreds of MiB).
func TestDeclaredFrameSizeIsNotAllocated(t *testing.T) {
	b := startBroker(t)
	const conns = 64
	before := heapAlloc()
	var ncs []net.Conn
	t.Cleanup(func() {
		for _, nc := range ncs {
			_ = nc.Close()
		}
	})
	for i := range conns {
		if i%2 == 0 {
			// Before CONNECT: the largest frame allowed there, 64 KiB.
			nc, err := net.Dial("tcp", b.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			ncs = append(ncs, nc)
			if _, err := nc.Write(partialFrame(maxHandshakeFrame, 8)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		// After CONNECT: a payload frame of the largest size, 5 MiB + 64 KiB.
		r := dialRaw(t, b)
		r.connect(maxProtocolVersion)
		ncs = append(ncs, r.nc)
		if _, err := r.nc.Write(partialFrame(maxFrameSize, 8)); err != nil {
			t.Fatal(err)
		}
	}
	// Every connection's frame header has been read (CONNECT frames count too).
	wait.For(t, "every declared frame seen", func() bool { return b.framesBegun.Load() >= conns+conns/2 })
	after := heapAlloc()
	grown := int64(after) - int64(before)
	t.Logf("heap grew by %d KiB for %d connections", grown>>10, conns)
	if grown > 8<<20 {
		t.Fatalf("heap grew by %d MiB for %d partial frames; want under 8 MiB", grown>>20, conns)
	}
	if b.Stats().ConnectionsOpen != conns {
		t.Fatalf("%d connections open, want %d", b.Stats().ConnectionsOpen, conns)
	}
}

// Before CONNECT a frame larger than 64 KiB closes the connection.
func TestLargeFrameBeforeConnectCloses(t *testing.T) {
	b := startBroker(t)
	nc, err := net.Dial("tcp", b.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write(partialFrame(maxHandshakeFrame+1, 8)); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read after an oversized handshake frame: %v, want EOF (connection closed)", err)
	}
}

// A connection that does not complete CONNECT within HandshakeTimeout is
// closed: one that stays silent, and one that sends a byte now and then
// (a slow-loris client), while a client that connects at once is served.
func TestHandshakeDeadline(t *testing.T) {
	const timeout = 300 * time.Millisecond
	b, err := Start(context.Background(), Options{HandshakeTimeout: timeout, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// closedAfter dials the broker and returns how long after the dial
	// began the broker closed the connection.
	closedAfter := func(t *testing.T, drip bool) time.Duration {
		t.Helper()
		began := time.Now()
		nc, err := net.Dial("tcp", b.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		done := make(chan error, 1)
		go func() {
			_ = nc.SetReadDeadline(time.Now().Add(20 * time.Second))
			_, err := nc.Read(make([]byte, 1))
			done <- err
		}()
		frame := partialFrame(100, 96)
		for i := 0; ; i++ {
			select {
			case err := <-done:
				// A byte dripped in after the broker stopped reading
				// turns its close into a reset.
				if err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
					t.Fatalf("read: %v, want EOF or a reset (closed by the broker)", err)
				}
				return time.Since(began)
			case <-time.After(50 * time.Millisecond):
			}
			if drip && i < len(frame) {
				_, _ = nc.Write(frame[i : i+1])
			}
		}
	}
	for _, drip := range []bool{false, true} {
		if d := closedAfter(t, drip); d < timeout {
			t.Errorf("drip=%t: closed after %v, before the %v handshake timeout", drip, d, timeout)
		}
	}
	// A client that sends CONNECT at once is served past the deadline.
	r := dialRaw(t, b)
	r.connect(maxProtocolVersion)
	time.Sleep(2 * timeout) // the handshake deadline must not apply after CONNECT
	r.send(cmdPing, nil, nil)
	r.expect(cmdPong)
}

// The handshake timeout has a documented default and is validated.
func TestHandshakeTimeoutOption(t *testing.T) {
	if d := (Options{}).WithDefaults().HandshakeTimeout; d != DefaultHandshakeTimeout {
		t.Fatalf("default handshake timeout %v, want %v", d, DefaultHandshakeTimeout)
	}
	if _, err := Start(context.Background(), Options{HandshakeTimeout: time.Microsecond}); err == nil {
		t.Fatal("a 1 µs handshake timeout was accepted")
	}
}
