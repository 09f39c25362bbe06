package loopback_test

import (
	"testing"

	"github.com/boulevard-go/boulevard/internal/loopback"
)

// Guarantee: an address without a host means the loopback interface; an
// address with a host, or one that does not parse, is kept as given.
func TestAddrWithoutAHostIsTheLoopbackInterface(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{":8080", "127.0.0.1:8080"},
		{":0", "127.0.0.1:0"},
		{"0.0.0.0:8080", "0.0.0.0:8080"},
		{"[::]:9", "[::]:9"},
		{"localhost:1", "localhost:1"},
		{"127.0.0.1:0", "127.0.0.1:0"},
		{"nonsense", "nonsense"},
	} {
		if got := loopback.Addr(c.in); got != c.want {
			t.Errorf("Addr(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
