package observe_test

import (
	"net"
	"testing"

	"github.com/boulevard-go/boulevard/observe"
)

// Guarantee: Close with a nil context stops the Server as a context that
// never ends would, bounded by ShutdownTimeout: it returns nil, the
// address no longer accepts connections, and the serving goroutine has
// returned (the package's leak check).
func TestServerCloseWithANilContextStopsTheServer(t *testing.T) {
	o := observe.New(observe.Options{})
	defer func() { _ = o.Close(t.Context()) }()
	s, err := o.Serve(t.Context(), observe.ServerOptions{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	var closeErr error
	func() {
		defer func() {
			if r := recover(); r != nil {
				_ = s.Close(t.Context())
				t.Fatalf("Close(nil) panicked: %v", r)
			}
		}()
		closeErr = s.Close(nil) //lint:ignore SA1012 the nil context is the misuse under test
	}()
	if closeErr != nil {
		t.Errorf("Close(nil) = %v, want nil", closeErr)
	}
	if c, err := net.Dial("tcp", s.Addr()); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after Close(nil)", s.Addr())
	}
}
