package testnet_test

import (
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testnet"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A silent listener accepts a connection and sends nothing on it.
func TestSilentListenerAcceptsAndNeverAnswers(t *testing.T) {
	c := dialAndSayHello(t, testnet.SilentListener(t))
	_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	var b [1]byte
	n, err := c.Read(b[:])
	if ne, ok := err.(net.Error); n != 0 || !ok || !ne.Timeout() {
		t.Fatalf("read: got %d bytes, %v; want a timeout with nothing read", n, err)
	}
}

// A closed port refuses connections.
func TestClosedPortRefusesConnections(t *testing.T) {
	addr := testnet.ClosedPort(t)
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err == nil {
		_ = c.Close()
		t.Fatalf("dial %s succeeded, want a refusal", addr)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s = %v, want connection refused", addr, err)
	}
}

// A garbage listener answers a client's first bytes with Garbage and
// closes the connection.
func TestGarbageListenerAnswersGarbageAndCloses(t *testing.T) {
	c := dialAndSayHello(t, testnet.GarbageListener(t))
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil || string(got) != testnet.Garbage {
		t.Fatalf("read %q, %v; want %q then the end of the connection", got, err, testnet.Garbage)
	}
}

// dialAndSayHello connects to addr and writes a few bytes; the connection
// is closed at t's cleanup.
func dialAndSayHello(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatalf("write: %v", err)
	}
	return c
}
