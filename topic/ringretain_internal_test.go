package topic

import (
	"runtime"
	"testing"
	"weak"
)

// payload stands for a large record: the ring must not keep one that no
// broadcast subscriber will read.
type payload [4096]byte

// Guarantee: the broadcast ring keeps no message that no subscriber will
// read. A message published while no broadcast subscriber is connected
// (a broadcast-only topic before its first subscriber, or a mixed topic
// whose only readers are consumer groups) is garbage once its groups
// received it, rather than staying reachable until queue_capacity later
// publishes overwrite its slot.
func TestRingKeepsNoMessageWithoutABroadcastReader(t *testing.T) {
	for _, mode := range []Mode{BroadcastOnly, Mixed} {
		t.Run(mode.String(), func(t *testing.T) {
			h, err := NewTopic[*payload]("t", Options{Mode: mode}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			var group *Subscription[*payload]
			if mode == Mixed {
				if group, err = h.Subscribe(t.Context(), Balanced("workers"), SubscriberOptions{}); err != nil {
					t.Fatal(err)
				}
				defer group.Close()
			}
			const n = 16
			published := publishPayloads(t, h, n, func() {
				if group != nil {
					if _, err := group.Receive(t.Context()); err != nil {
						t.Fatal(err)
					}
				}
			})
			if kept := reachable(published); kept != 0 {
				t.Fatalf("%d of %d messages that no broadcast subscriber will read are still reachable, want 0", kept, n)
			}
		})
	}
}

// Guarantee: a broadcast subscriber that leaves without reading what was
// delivered to it takes its claim on those messages with it: once no
// other subscriber will read them, they are garbage, rather than staying
// reachable until queue_capacity later publishes overwrite their slots.
func TestRingKeepsNoMessageItsLeavingSubscriberDidNotRead(t *testing.T) {
	h, sub := subscribedBroadcast[*payload](t, Options{Mode: BroadcastOnly})
	const n = 16
	published := publishPayloads(t, h, n, func() {})
	sub.Close()
	if kept := reachable(published); kept != 0 {
		t.Fatalf("%d of %d messages whose only subscriber left are still reachable, want 0", kept, n)
	}
}

// reachable collects garbage and returns how many of published are still
// reachable.
func reachable(published []weak.Pointer[payload]) int {
	runtime.GC()
	kept := 0
	for _, w := range published {
		if w.Value() != nil {
			kept++
		}
	}
	return kept
}

// publishPayloads publishes n payloads into h, calling after each, and
// returns weak pointers to them.
func publishPayloads(t *testing.T, h *Handle[*payload], n int, after func()) []weak.Pointer[payload] {
	t.Helper()
	published := make([]weak.Pointer[payload], n)
	for i := range n {
		p := &payload{}
		published[i] = weak.Make(p)
		if err := h.Publish(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		after()
	}
	return published
}
