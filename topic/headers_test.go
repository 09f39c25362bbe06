package topic_test

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/boulevard-go/boulevard/topic"
)

func wantHeaders(t *testing.T, who string, it topic.Item[int], want topic.Headers) {
	t.Helper()
	if !maps.Equal(it.Headers, want) || (want == nil) != (it.Headers == nil) {
		t.Errorf("%s: item %d headers = %v, want %v", who, it.Value, it.Headers, want)
	}
}

// recipientsOf subscribes to h what a topic of mode may have: a group
// (two on a mixed topic) and two broadcast subscribers.
func recipientsOf(t *testing.T, h *topic.Handle[int], mode topic.Mode) []*topic.Subscription[int] {
	t.Helper()
	var subs []*topic.Subscription[int]
	if mode != topic.BroadcastOnly {
		subs = append(subs, subscribeInt(t, h, topic.Balanced("g")))
	}
	if mode == topic.Mixed {
		subs = append(subs, subscribeInt(t, h, topic.Balanced("other")))
	}
	if mode != topic.BalancedOnly {
		subs = append(subs, subscribeInt(t, h, topic.Broadcast()), subscribeInt(t, h, topic.Broadcast()))
	}
	return subs
}

// Every recipient of a publish (each balanced group, each broadcast
// subscriber of a mixed topic) receives the headers it was published with,
// through Receive and ReceiveBatch, and a message published without headers
// arrives with nil headers.
func TestHeadersReachEveryRecipient(t *testing.T) {
	for _, mode := range []topic.Mode{topic.BalancedOnly, topic.BroadcastOnly, topic.Mixed} {
		t.Run(mode.String(), func(t *testing.T) {
			h := newIntTopic(t, topic.Options{Mode: mode})
			subs := recipientsOf(t, h, mode)
			hdr := topic.Headers{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
			ctx := testCtx(t)
			if out, err := h.PublishWithHeaders(ctx, 1, hdr, topic.Block); err != nil || out != topic.Published {
				t.Fatalf("PublishWithHeaders = %v, %v", out, err)
			}
			if err := h.Publish(ctx, 2); err != nil {
				t.Fatal(err)
			}
			for i, s := range subs {
				it, err := s.Receive(ctx)
				if err != nil {
					t.Fatal(err)
				}
				wantHeaders(t, "Receive", it, hdr)
				dst := make([]topic.Item[int], 4)
				n, err := s.ReceiveBatch(ctx, dst)
				if err != nil || n != 1 {
					t.Fatalf("subscriber %d: ReceiveBatch = %d, %v", i, n, err)
				}
				wantHeaders(t, "ReceiveBatch", dst[0], nil)
			}
		})
	}
}

// A tracked publish carries its headers too (PublishHeaders and
// PublishFuncHeaders), and still resolves through the subscriber's ack.
func TestTrackedPublishCarriesHeaders(t *testing.T) {
	h := newIntTopic(t, topic.Options{})
	sub := subscribeInt(t, h, topic.Balanced("g"))
	p := newTracked(t, h, topic.TrackedOptions{})
	ctx := testCtx(t)
	a, b := topic.Headers{"k": "a"}, topic.Headers{"k": "b", "x": "y"}
	r, err := p.PublishHeaders(ctx, 1, a)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan topic.Result, 1)
	if err := p.PublishFuncHeaders(ctx, 2, b, func(res topic.Result) { done <- res }); err != nil {
		t.Fatal(err)
	}
	for _, want := range []topic.Headers{a, b} {
		it, err := sub.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wantHeaders(t, "tracked", it, want)
		if err := sub.Ack(it.ID); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := r.Wait(ctx); err != nil || res.Outcome != topic.Acked {
		t.Fatalf("PublishHeaders receipt = %+v, %v", res, err)
	}
	select {
	case res := <-done:
		if res.Outcome != topic.Acked {
			t.Fatalf("PublishFuncHeaders outcome = %+v", res)
		}
	case <-ctx.Done():
		t.Fatal("PublishFuncHeaders outcome never reported")
	}
}

// A backend other than the in-memory one gets the headers in the envelope
// it is asked to publish, and the subscription hands a received envelope's
// headers to the subscriber.
func TestHeadersPassThroughABackend(t *testing.T) {
	h, st := newSettling(t, false)
	sub := subscribeInt(t, h, topic.Balanced("g"))
	hdr := topic.Headers{"k": "v"}
	if _, err := h.PublishWithHeaders(testCtx(t), 5, hdr, topic.Block); err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	got := st.queue[0].Headers
	st.mu.Unlock()
	if !maps.Equal(got, hdr) {
		t.Fatalf("backend envelope headers = %v, want %v", got, hdr)
	}
	it, err := sub.Receive(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	wantHeaders(t, "backend", it, hdr)
}

// Headers read and write as a text-map carrier: Get of a missing key (or on
// nil headers) is "", Set adds, Keys lists every key.
func TestHeadersCarrier(t *testing.T) {
	var none topic.Headers
	if none.Get("k") != "" || len(none.Keys()) != 0 {
		t.Fatalf("nil headers: Get %q, Keys %v", none.Get("k"), none.Keys())
	}
	h := topic.Headers{}
	h.Set("a", "1")
	h.Set("b", "2")
	keys := h.Keys()
	slices.Sort(keys)
	if h.Get("a") != "1" || !slices.Equal(keys, []string{"a", "b"}) {
		t.Fatalf("Get(a) = %q, Keys = %v", h.Get("a"), keys)
	}
}

// Publishing and receiving without headers allocates nothing, and headers
// are carried by reference: publishing with them allocates nothing more.
func TestHeadersCostNothingWhenAbsent(t *testing.T) {
	h := newIntTopic(t, topic.Options{})
	sub := subscribeInt(t, h, topic.Balanced("g"))
	ctx := context.Background()
	hdr := topic.Headers{"k": "v"}
	dst := make([]topic.Item[int], 1)
	for _, c := range []struct {
		name string
		hdr  topic.Headers
	}{{"none", nil}, {"with", hdr}} {
		allocs := testing.AllocsPerRun(1000, func() {
			if _, err := h.PublishWithHeaders(ctx, 1, c.hdr, topic.Block); err != nil {
				t.Fatal(err)
			}
			if n, err := sub.ReceiveBatch(ctx, dst); err != nil || n != 1 {
				t.Fatalf("ReceiveBatch = %d, %v", n, err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per publish and receive, want 0", c.name, allocs)
		}
	}
}
