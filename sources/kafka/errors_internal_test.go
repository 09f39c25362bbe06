package kafka

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// Guarantee: errors built from sarama's multi-line errors are on one line
// and still unwrap to what they wrap.
func TestErrorsOnOneLine(t *testing.T) {
	inner := errors.Join(context.DeadlineExceeded, errors.New("connection error"))
	err := fmt.Errorf("%w: %w", ErrConnect, flat(inner))
	if strings.ContainsAny(err.Error(), "\r\n") {
		t.Fatalf("error spans lines: %q", err)
	}
	if want := "kafka: cannot connect: context deadline exceeded; connection error"; err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrConnect) {
		t.Fatalf("error %v does not unwrap", err)
	}
	list := errList{errors.New("a\r\nb"), flat(inner)}
	if got := list.Error(); got != "a; b; context deadline exceeded; connection error" || !errors.Is(list, context.DeadlineExceeded) {
		t.Fatalf("errList %q", got)
	}
}
