package pulsartopology

import (
	"errors"
	"testing"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// panickingEncode is a codec whose Encode panics.
type panickingEncode struct{}

func (panickingEncode) Encode(topologytest.Msg) ([]byte, error) { panic("encode") }
func (panickingEncode) Decode([]byte) (topologytest.Msg, error) { return topologytest.Msg{}, nil }

// Guarantee: a codec that panics on encoding a letter fails that letter's
// send as a codec error does, with an error wrapping the
// *message.PanicError; nothing is sent.
func TestPanickingEncodeFailsOnlyItsLetter(t *testing.T) {
	top, err := topology.New("t").Build()
	if err != nil {
		t.Fatal(err)
	}
	q := &queues[topologytest.Msg]{b: &Backend[topologytest.Msg]{opts: Options[topologytest.Msg]{Codec: panickingEncode{}}}, t: top}
	m, err := q.message(&topology.Letter[topologytest.Msg]{}, "")
	var pe *message.PanicError
	if !errors.As(err, &pe) || pe.Value != "encode" || m != nil {
		t.Fatalf("message = %v, %v; want no message and an error wrapping the Encode panic", m, err)
	}
}
