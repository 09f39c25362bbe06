package sink_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/sink"
)

type ctxKey struct{}

// headerRig is a topic, a subscription and a sink whose Options.Headers
// names each message by its partition key and the value the publishing
// context carries under ctxKey.
func headerRig(t *testing.T, opts topic.Options) (*topic.Subscription[int], *sink.Sink[int]) {
	t.Helper()
	h, err := topic.NewTopic[int]("t", opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	sub, err := h.Subscribe(topic.Balanced("g"), topic.SubscriberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Close)
	s, err := sink.New(sink.Options[int]{
		Binding: topic.Binding[int]{Handle: h, AckPropagation: h.Options().AckPropagation},
		Headers: func(ctx context.Context, m message.Keyed) topic.Headers {
			v, _ := ctx.Value(ctxKey{}).(string)
			return topic.Headers{"key": m.PartitionKey(), "ctx": v}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return sub, s
}

func keyed[T any](v T, rec acker.Acknowledger, id uint64) *message.Message[T] {
	m := message.New(v, rec, id)
	m.SetPartitionKey("k" + strconv.FormatUint(id, 10))
	return m
}

// Options.Headers is asked once per publish, with the publishing call's
// context and the message published on behalf of, and its headers reach
// the subscriber, for Publish, PublishValue (a message of another payload
// type) and every message of PublishBatch, tracked or not.
func TestHeadersFromOptionsReachTheSubscriber(t *testing.T) {
	for _, c := range []struct {
		name string
		opts topic.Options
	}{{"untracked", topic.Options{}}, {"tracked", autoOpts(0)}} {
		t.Run(c.name, func(t *testing.T) {
			sub, s := headerRig(t, c.opts)
			rec := acker.NewRecorder(false)
			ctx := context.WithValue(ctxT(t), ctxKey{}, "publisher")
			if err := s.Publish(ctx, keyed(1, rec, 1)); err != nil {
				t.Fatal(err)
			}
			if err := sink.PublishValue(ctx, s, keyed("two", rec, 2), 2); err != nil {
				t.Fatal(err)
			}
			if err := s.PublishBatch(ctx, []*message.Message[int]{keyed(3, rec, 3), keyed(4, rec, 4)}); err != nil {
				t.Fatal(err)
			}
			for want := 1; want <= 4; want++ {
				it, err := sub.Receive(ctxT(t))
				if err != nil {
					t.Fatal(err)
				}
				if it.Value != want || it.Headers.Get("key") != "k"+strconv.Itoa(want) || it.Headers.Get("ctx") != "publisher" {
					t.Fatalf("item %d headers %v, want key k%d and ctx publisher", it.Value, it.Headers, want)
				}
				if s.Tracked() {
					if err := sub.Ack(it.ID); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
}

// Without Options.Headers, messages are published without headers, and an
// untracked publish through the sink allocates nothing.
func TestNoHeadersWithoutTheOption(t *testing.T) {
	_, sub, s := rig(t, topic.Options{}, topic.Block, topic.Balanced("g"))
	rec := acker.NewRecorder(false)
	ctx := ctxT(t)
	var m message.Message[int]
	dst := make([]topic.Item[int], 1)
	allocs := testing.AllocsPerRun(1000, func() {
		m.Init(1, rec, 1)
		if err := s.Publish(ctx, &m); err != nil {
			t.Fatal(err)
		}
		if n, err := sub.ReceiveBatch(ctx, dst); err != nil || n != 1 {
			t.Fatalf("ReceiveBatch = %d, %v", n, err)
		}
		if dst[0].Headers != nil {
			t.Fatalf("headers %v published without Options.Headers", dst[0].Headers)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per untracked publish without headers, want 0", allocs)
	}
}
