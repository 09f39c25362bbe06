package topology_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// headedQueues declares an unsequenced topology on a new in-memory
// backend, closed when the test ends.
func headedQueues(t *testing.T, name string) (*topology.Memory[int], topology.Queues[int]) {
	t.Helper()
	m, err := topology.NewMemory[int](topology.MemoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	top, err := topology.New(name).Build()
	if err != nil {
		t.Fatal(err)
	}
	q, err := m.Declare(t.Context(), top)
	if err != nil {
		t.Fatal(err)
	}
	return m, q
}

// Guarantee: a Publisher whose Headers panics fails that Publish with an
// error wrapping the *message.PanicError and publishes nothing; the next
// value goes out with its headers.
func TestPublisherHeadersPanicFailsOnlyThatPublish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, q := headedQueues(t, "hp")
		pub, err := topology.NewPublisher(q, topology.PublisherOptions[int]{Headers: func(_ context.Context, v int) topic.Headers {
			if v == 1 {
				panic("headers")
			}
			return topic.Headers{"x": "y"}
		}})
		if err != nil {
			t.Fatal(err)
		}
		err = pub.Publish(t.Context(), 1)
		var pe *message.PanicError
		if !errors.As(err, &pe) || pe.Value != "headers" {
			t.Fatalf("Publish with a panicking Headers = %v, want an error wrapping its *message.PanicError", err)
		}
		if err := pub.Publish(t.Context(), 2); err != nil {
			t.Fatal(err)
		}
		if n := m.Queued("hp", "hp"); n != 1 {
			t.Fatalf("%d letters queued, want 1, the one value published", n)
		}
		r, _ := q.Subscribe(t.Context())
		buf := make([]topology.Letter[int], 1)
		if n, err := r.TryReceive(t.Context(), buf); n != 1 || err != nil || buf[0].Value != 2 || buf[0].Headers["x"] != "y" {
			t.Fatalf("TryReceive = %d %+v, %v; want the value 2 with its headers", n, buf[0], err)
		}
	})
}

// Guarantee: headers over MaxHeaderBytes fail the Publish, through a
// Publisher and through the backend's Queues.Publish, with an error
// wrapping ErrHeadersTooLarge, and nothing is published; headers of
// exactly MaxHeaderBytes, and reserved names beyond it, are published.
func TestPublishRefusesHeadersOverMaxHeaderBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, q := headedQueues(t, "big")
		at := topic.Headers{"k": strings.Repeat("v", topology.MaxHeaderBytes-1)}
		over := topic.Headers{"k": strings.Repeat("v", topology.MaxHeaderBytes)}
		reservedOver := maps.Clone(at)
		reservedOver[topology.ReservedHeaderPrefix+"x"] = "y"
		var give topic.Headers
		pub, err := topology.NewPublisher(q, topology.PublisherOptions[int]{Headers: func(context.Context, int) topic.Headers { return give }})
		if err != nil {
			t.Fatal(err)
		}
		give = over
		if err := pub.Publish(t.Context(), 1); !errors.Is(err, topology.ErrHeadersTooLarge) {
			t.Errorf("Publisher.Publish with %d bytes of headers = %v, want ErrHeadersTooLarge", topology.MaxHeaderBytes+1, err)
		}
		if err := q.Publish(t.Context(), topology.Letter[int]{Value: 1, Headers: over}); !errors.Is(err, topology.ErrHeadersTooLarge) {
			t.Errorf("Queues.Publish with %d bytes of headers = %v, want ErrHeadersTooLarge", topology.MaxHeaderBytes+1, err)
		}
		if n := m.Queued("big", "big"); n != 0 {
			t.Fatalf("%d letters queued after refused publishes, want 0", n)
		}
		for _, h := range []topic.Headers{at, reservedOver} {
			give = h
			if err := pub.Publish(t.Context(), 2); err != nil {
				t.Errorf("Publish with %d bytes of headers besides the reserved ones: %v", topology.MaxHeaderBytes, err)
			}
		}
	})
}

// Guarantee: the in-memory backend keeps a copy of the headers it is
// published with: a change to the publisher's map afterwards is not seen
// by the reader.
func TestMemoryPublishKeepsACopyOfTheHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, q := headedQueues(t, "copied")
		h := topic.Headers{"traceparent": "a"}
		if err := q.Publish(t.Context(), topology.Letter[int]{Value: 1, Headers: h}); err != nil {
			t.Fatal(err)
		}
		h["traceparent"] = "b"
		r, _ := q.Subscribe(t.Context())
		buf := make([]topology.Letter[int], 1)
		if n, err := r.TryReceive(t.Context(), buf); n != 1 || err != nil || buf[0].Headers["traceparent"] != "a" {
			t.Fatalf("TryReceive = %d %v, %v; want the letter with traceparent a, as published", n, buf[0].Headers, err)
		}
	})
}
