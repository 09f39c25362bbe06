package pulsartopology_test

import (
	"maps"
	"testing"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/pulsartopology"
)

// Guarantee: a message produced into a topology's main topic by
// something else delivers its properties as the letter's Headers (a
// traceparent among them), without the reserved ones, which are read as
// the letter's history.
func TestAnExternalMessagesPropertiesAreItsHeaders(t *testing.T) {
	br := testbroker.Pulsar(t)
	be := newBackend(t, options(br, topic.Codec[string](topic.JSONCodec[string]{})))
	_, r := declared(t, be, build(t, topology.New("outside")))
	want := topic.Headers{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "x-tenant": "acme"}
	props := maps.Clone(map[string]string(want))
	props[pulsartopology.PropRetries] = "2"
	if _, err := br.Publish(ctxT(t), full("outside"), pulsartest.Message{Payload: []byte(`"v"`), Properties: props}); err != nil {
		t.Fatal(err)
	}
	buf := make([]topology.Letter[string], 1)
	if n, err := r.Receive(ctxT(t), buf); err != nil || n != 1 {
		t.Fatalf("Receive = %d, %v", n, err)
	}
	if !maps.Equal(buf[0].Headers, want) || buf[0].Retries != 2 {
		t.Errorf("letter headers %v, retries %d; want %v and 2", buf[0].Headers, buf[0].Retries, want)
	}
}
