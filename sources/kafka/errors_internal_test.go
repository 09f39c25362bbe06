package kafka

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/IBM/sarama"
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

// Guarantee: a fetch answer sarama refuses because it is larger than
// sarama.MaxResponseSize fails the member with ErrCorruptBatch whose
// message says that the answer is too large and which limit to raise,
// not that the batch is corrupt; a length sarama refuses as too small is
// reported as it was.
func TestAnAnswerPastMaxResponseSizeIsNamedAsSuch(t *testing.T) {
	tooLarge := sarama.PacketDecodingError{Info: fmt.Sprintf("message of length %d too large or too small", sarama.MaxResponseSize+1)}
	err := corruptFetch("media", 3, 42, &sarama.ConsumerError{Topic: "media", Partition: 3, Err: tooLarge})
	var pde sarama.PacketDecodingError
	if !errors.Is(err, ErrCorruptBatch) || !errors.As(err, &pde) {
		t.Fatalf("corruptFetch = %v, want an error wrapping ErrCorruptBatch and sarama's", err)
	}
	want := fmt.Sprintf(`fetching partition "media"/3 from offset 42: the broker's answer of %d bytes is larger than sarama.MaxResponseSize (%d): raise it`,
		sarama.MaxResponseSize+1, sarama.MaxResponseSize)
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("corruptFetch = %q, want it to say %q", err, want)
	}

	tooSmall := sarama.PacketDecodingError{Info: "message of length 3 too large or too small"}
	err = corruptFetch("media", 3, -1, tooSmall)
	if msg := err.Error(); strings.Contains(msg, "MaxResponseSize") || !strings.Contains(msg, `fetching partition "media"/3: kafka: error decoding packet: message of length 3`) {
		t.Fatalf("corruptFetch of a length too small = %q, want the decoding error as it is", msg)
	}
}
