package observe_test

import (
	"testing"

	"github.com/boulevard-go/boulevard/observe"
)

// Guarantee: Close on a Server that Observer.Serve did not make (a zero
// value, declared with var, as a program that closes whatever it may have
// started does) returns nil instead of panicking: there is nothing to stop.
func TestCloseOfAZeroServerReturnsNil(t *testing.T) {
	var s observe.Server
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("Close of a zero Server panicked: %v", r)
			}
		}()
		err = s.Close(t.Context())
	}()
	if err != nil {
		t.Errorf("Close of a zero Server: %v, want nil", err)
	}
}
