package pulsar_test

import (
	"errors"
	"testing"

	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
)

// TestAZeroCloseWatchReportsTheClosure checks that a CloseWatch not made
// by NewCloseWatch reports its consumer's closure as one made by it does:
// its Done is open, then closed once OnConsumerClose was called (which
// must not panic on the client's goroutine), and Err tells the cause.
func TestAZeroCloseWatchReportsTheClosure(t *testing.T) {
	var w bpulsar.CloseWatch
	done := w.Done()
	select {
	case <-done:
		t.Fatal("Done is closed before the consumer closed")
	default:
	}
	if err := w.Err(); err != nil {
		t.Fatalf("Err before the closure = %v, want nil", err)
	}
	w.OnConsumerClose(nil, nil)
	select {
	case <-done:
	default:
		t.Fatal("Done, taken before the closure, is still open after it")
	}
	if err := w.Err(); !errors.Is(err, bpulsar.ErrClosedByCall) {
		t.Errorf("Err = %v, want ErrClosedByCall", err)
	}
}
