package kafkatopology

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// panickingCodec panics in Encode and in Decode.
type panickingCodec struct{}

func (panickingCodec) Encode(topologytest.Msg) ([]byte, error) { panic("encode") }
func (panickingCodec) Decode([]byte) (topologytest.Msg, error) { panic("decode") }

var _ topic.Codec[topologytest.Msg] = panickingCodec{}

// Guarantee: a codec that panics fails the letter it was given as a codec
// error does: a record it panics on decoding is logged once as one that
// does not decode (and so skipped), and a letter it panics on encoding is
// not produced, with an error wrapping the *message.PanicError.
func TestPanickingCodecFailsOnlyItsLetter(t *testing.T) {
	var logged bytes.Buffer
	b := &Backend[topologytest.Msg]{
		opts: Options[topologytest.Msg]{Codec: panickingCodec{}},
		log:  slog.New(slog.NewTextHandler(&logged, nil)),
	}
	bf := newBuffer[topologytest.Msg](1, b.log)
	_, _, err := bf.readLetter(b, &sarama.ConsumerMessage{Topic: "t", Value: []byte("{}")})
	var pe *message.PanicError
	if !errors.As(err, &pe) || pe.Value != "decode" {
		t.Fatalf("readLetter = %v, want an error wrapping the Decode panic", err)
	}
	if n := strings.Count(logged.String(), "does not decode"); n != 1 || bf.Undecodable() != 1 {
		t.Fatalf("%d decode warnings, %d counted, want 1 and 1: %s", n, bf.Undecodable(), logged.String())
	}
	top, err := topology.New("t").Build()
	if err != nil {
		t.Fatal(err)
	}
	q := &queues[topologytest.Msg]{b: b, t: top, main: "t"}
	if _, err := q.record(t.Context(), "t", &topology.Letter[topologytest.Msg]{}, 0); !errors.As(err, &pe) || pe.Value != "encode" {
		t.Fatalf("record = %v, want an error wrapping the Encode panic", err)
	}
}
