package topic

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic/internal/quote"
)

// Codec turns a topic's values into bytes and back, for backends that
// carry messages outside the process (packages topic/kafkatopic and
// topic/pulsartopic). The in-memory backend needs none. Implementations
// must be safe for concurrent use. Decode gets a slice it may keep.
//
// The backends recover a panic in a codec: one in Encode fails that
// publish with an error wrapping the *message.PanicError, one in Decode
// makes that payload one that does not decode (logged and skipped, as
// each backend documents for a decode error). A Decode that ends its
// goroutine (runtime.Goexit, as t.FailNow does) makes the payload one
// that does not decode too, logged with the stack of the exit (unless its
// line is held back in a burst, as a decode error's is): a
// Kafka backend's reader goes on with the next record (on a new
// goroutine), a Pulsar backend's Receive, whose caller's goroutine the
// exit ends, acknowledges that message and nacks those it had taken
// before it in the same call. An Encode that ends its goroutine ends the
// publisher's, with nothing sent and nothing of the topic left held.
type Codec[T any] interface {
	Encode(v T) ([]byte, error)
	Decode(b []byte) (T, error)
}

// Encode calls c.Encode(v) and returns a panic in it as a
// *message.PanicError. The topology backends encode through it: a codec
// that panics on a value fails that publish, hold, requeue or
// dead-lettering with an error, as a codec error does.
func Encode[T any](c Codec[T], v T) (b []byte, err error) {
	defer message.Recover(&err)
	return c.Encode(v)
}

// Decode calls c.Decode(b) and returns a panic in it as a
// *message.PanicError. The backends decode through it: a codec that panics
// on a payload makes that payload one that does not decode (skipped and
// logged, as each backend documents), never a crash of the goroutine that
// consumes the topic.
func Decode[T any](c Codec[T], b []byte) (v T, err error) {
	defer message.Recover(&err)
	return c.Decode(b)
}

// BytesCodec carries []byte values as they are.
type BytesCodec struct{}

// Encode returns v.
func (BytesCodec) Encode(v []byte) ([]byte, error) { return v, nil }

// Decode returns b.
func (BytesCodec) Decode(b []byte) ([]byte, error) { return b, nil }

// StringCodec carries string values as their UTF-8 bytes.
type StringCodec struct{}

// Encode returns the bytes of v.
func (StringCodec) Encode(v string) ([]byte, error) { return []byte(v), nil }

// Decode returns b as a string.
func (StringCodec) Decode(b []byte) (string, error) { return string(b), nil }

// JSONCodec carries values as JSON (encoding/json).
type JSONCodec[T any] struct{}

// Encode marshals v.
func (JSONCodec[T]) Encode(v T) ([]byte, error) { return json.Marshal(v) }

// Decode unmarshals b; a payload it cannot unmarshal is a [*DecodeError]
// wrapping encoding/json's error.
func (JSONCodec[T]) Decode(b []byte) (T, error) {
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return v, &DecodeError{Codec: "json", Err: err}
	}
	return v, nil
}

// IntCodec carries int values as 8-byte big-endian integers, so that tools
// reading the topic see a fixed-width number.
type IntCodec struct{}

// Encode returns v as 8 big-endian bytes.
func (IntCodec) Encode(v int) ([]byte, error) {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), uint64(v)), nil
}

// Decode reads 8 big-endian bytes; any other length is a [*DecodeError].
func (IntCodec) Decode(b []byte) (int, error) {
	if len(b) != 8 {
		return 0, &DecodeError{Codec: "int", Err: fmt.Errorf("want 8 bytes, got %s", strconv.Itoa(len(b)))}
	}
	return int(binary.BigEndian.Uint64(b)), nil
}

// DecodeError is a received payload that a codec could not decode.
type DecodeError struct {
	// Codec names the codec ("int", "json", ...).
	Codec string
	// Err is the codec's error.
	Err error
}

// Error returns "topic: <codec> codec: <err>". The codec's error text is
// cut after 512 bytes and its control characters escaped, so
// the text stays short and on one line whatever the payload held (a JSON
// number of a million digits, say).
func (e *DecodeError) Error() string {
	return "topic: " + quote.Text(e.Codec) + " codec: " + quote.Text(e.Err.Error())
}

// Unwrap returns Err.
func (e *DecodeError) Unwrap() error { return e.Err }
