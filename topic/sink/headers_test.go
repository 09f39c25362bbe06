package sink_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/sink"
)

type ctxKey struct{}

// nameHeaders names each message by its partition key and the value the
// publishing context carries under ctxKey.
func nameHeaders(ctx context.Context, m message.Keyed) topic.Headers {
	v, _ := ctx.Value(ctxKey{}).(string)
	return topic.Headers{"key": m.PartitionKey(), "ctx": v}
}

// headerRig is a topic, a subscription and a sink with headers as its
// Options.Headers.
func headerRig(t *testing.T, opts topic.Options, headers func(context.Context, message.Keyed) topic.Headers) (*topic.Subscription[int], *sink.Sink[int]) {
	t.Helper()
	_, sub, s := rigWith(t, opts, topic.Balanced("g"), sink.Options[int]{Headers: headers})
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
			sub, s := headerRig(t, c.opts, nameHeaders)
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

// panicsOn returns an Options.Headers that panics for the message whose
// partition key is key, and names every other one.
func panicsOn(key string) func(context.Context, message.Keyed) topic.Headers {
	return func(_ context.Context, m message.Keyed) topic.Headers {
		if m.PartitionKey() == key {
			panic("headers of " + key)
		}
		return topic.Headers{"key": m.PartitionKey()}
	}
}

// noPanic runs f and fails t if it panicked.
func noPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v", what, r)
		}
	}()
	f()
}

// Guarantee: with ack propagation auto, a panic of Options.Headers fails
// that message's publish with an error wrapping *message.PanicError,
// without deferring it (the pipeline reports its outcome); in a
// PublishBatch the message is failed, and the others of the batch are
// published and their downstream outcomes still reported upstream.
func TestHeadersPanicFailsThePublishAndKeepsTheOutcomes(t *testing.T) {
	rig := func(t *testing.T) (*topic.Subscription[int], *sink.Sink[int]) {
		return headerRig(t, autoOpts(0), panicsOn("k2"))
	}
	t.Run("Publish", func(t *testing.T) {
		_, s := rig(t)
		m := keyed(2, acker.NewRecorder(false), 2)
		noPanic(t, "Publish", func() {
			var pe *message.PanicError
			if err := s.Publish(ctxT(t), m); !errors.As(err, &pe) || !strings.HasPrefix(err.Error(), "sink: headers for a message into t: ") {
				t.Errorf("Publish = %v, want an error naming topic t and wrapping *message.PanicError", err)
			}
		})
		if m.Deferred() {
			t.Fatal("the message whose headers panicked was left deferred: its outcome would never be reported")
		}
	})
	t.Run("PublishBatch", func(t *testing.T) {
		sub, s := rig(t)
		rec := acker.NewRecorder(false)
		batch := []*message.Message[int]{keyed(1, rec, 1), keyed(2, rec, 2), keyed(3, rec, 3)}
		noPanic(t, "PublishBatch", func() {
			if err := s.PublishBatch(ctxT(t), batch); err != nil {
				t.Errorf("PublishBatch = %v", err)
			}
		})
		var pe *message.PanicError
		if !batch[1].Failed() || batch[1].Deferred() || !errors.As(batch[1].Err(), &pe) {
			t.Errorf("message 2: failed %v, deferred %v, error %v; want failed with a *message.PanicError, not deferred",
				batch[1].Failed(), batch[1].Deferred(), batch[1].Err())
		}
		published := int(s.Stats().Published)
		if published != 2 {
			t.Errorf("%d messages of the batch published, want 1 and 3", published)
		}
		for range published {
			it, err := sub.Receive(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			if err := sub.Ack(it.ID); err != nil {
				t.Fatal(err)
			}
		}
		if err := rec.Wait(ctxT(t), published); err != nil {
			t.Fatalf("the outcomes of the %d published messages were never reported: %v (got %+v)", published, err, rec.Calls())
		}
		if got := rec.Successful(); len(got) != 2 || got[0].ID+got[1].ID != 4 {
			t.Fatalf("successful %+v, want messages 1 and 3", got)
		}
	})
}
