package pulsar_test

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// Guarantee: Info is ordered on the subscription types whose broker keeps
// an order (KeyShared per key, Exclusive and Failover per partition),
// unordered on Shared, and unordered on any type with Unordered set, or
// on KeyShared with a policy allowing out-of-order delivery.
func TestInfoOrderedFollowsSubscriptionType(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		typ       bpulsar.SubscriptionType
		unordered bool
		want      bool
	}{
		{bpulsar.Shared, false, false},
		{bpulsar.KeyShared, false, true},
		{bpulsar.Exclusive, false, true},
		{bpulsar.Failover, false, true},
		{bpulsar.Shared, true, false},
		{bpulsar.KeyShared, true, false},
		{bpulsar.Exclusive, true, false},
		{bpulsar.Failover, true, false},
	} {
		src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"t"}, Subscription: "sub",
			SubscriptionType: tc.typ, Unordered: tc.unordered})
		info, err := src.Info()
		if err != nil {
			t.Fatal(err)
		}
		if info.Ordered != tc.want {
			t.Errorf("%s, Unordered %t: Info().Ordered %t, want %t", tc.typ, tc.unordered, info.Ordered, tc.want)
		}
	}
	// A KeyShared policy that allows out-of-order delivery gives up the
	// broker's order: the source does not claim one.
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"t"}, Subscription: "sub",
		SubscriptionType: bpulsar.KeyShared,
		Consumer:         pulsar.ConsumerOptions{KeySharedPolicy: &pulsar.KeySharedPolicy{AllowOutOfOrderDelivery: true}}})
	if info, err := src.Info(); err != nil || info.Ordered {
		t.Errorf("KeyShared with AllowOutOfOrderDelivery: Info() = %+v, %v; want unordered", info, err)
	}
}

// orderLog checks, per stream (a key or a partition), that the handler
// sees the sequence numbers published on it in increasing order, and that
// each message carries the partition key it should.
type orderLog struct {
	mu       sync.Mutex
	last     map[string]int
	n        int
	inverted []string
	badKeys  []string
}

func newOrderLog() *orderLog { return &orderLog{last: map[string]int{}} }

// add records message seq of stream, whose partition key is got and
// should be want.
func (l *orderLog) add(stream string, seq int, got, want string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	if last, ok := l.last[stream]; ok && seq <= last && len(l.inverted) < 10 {
		l.inverted = append(l.inverted, fmt.Sprintf("%s: %d after %d", stream, seq, last))
	}
	l.last[stream] = max(seq, l.last[stream])
	if got != want && len(l.badKeys) < 10 {
		l.badKeys = append(l.badKeys, fmt.Sprintf("%s/%d: partition key %q, want %q", stream, seq, got, want))
	}
}

func (l *orderLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

func (l *orderLog) check(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.inverted) > 0 {
		t.Errorf("messages handled out of publish order (first %d): %v", len(l.inverted), l.inverted)
	}
	if len(l.badKeys) > 0 {
		t.Errorf("wrong partition keys (first %d): %v", len(l.badKeys), l.badKeys)
	}
}

// varyingWork makes handling take longer for some messages than for
// others, so that processors sharing a stream would overtake each other.
func varyingWork(seq int) {
	if d := seq % 4; d != 0 {
		time.Sleep(time.Duration(d) * 50 * time.Microsecond)
	}
}

// parseSeq splits a payload "<stream>|<seq>", or "<stream>|<seq>|<padding>".
func parseSeq(t *testing.T, data []byte) (string, int) {
	stream, n, _ := strings.Cut(string(data), "|")
	n, _, _ = strings.Cut(n, "|")
	seq, err := strconv.Atoi(n)
	if err != nil {
		t.Errorf("payload %q: %v", data, err)
	}
	return stream, seq
}

// runOrdered runs a pipeline over src, with producers stages and four
// processors, whose handler records each message in log and takes a
// varying time.
func runOrdered(t *testing.T, src *bpulsar.Source, producers int, log *orderLog, wantKey func(*bpulsar.Metadata) string) (stop func() error) {
	t.Helper()
	_, stop = start(t, pipeline.Options[[]byte, []byte]{
		Name:     "pulsar-order",
		Logger:   testLogger(),
		Producer: producer.Options[[]byte]{Source: src, Concurrency: producers},
		Processors: processor.Options[[]byte, []byte]{Concurrency: 4, Handle: func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
			md, _ := message.MetadataAs[*bpulsar.Metadata](m)
			stream, seq := parseSeq(t, m.Data)
			varyingWork(seq)
			log.add(stream, seq, m.PartitionKey(), wantKey(md))
			return m.Data, nil
		}},
	})
	return stop
}

// Guarantee: on a KeyShared subscription each key's messages are handled
// in publish order, however many processors and producer stages, with the
// ordering key taking precedence over the key (as the broker routes by
// it); messages with neither key form one stream of their own. Payloads
// larger than a KiB (which the source allocates apart from its slabs)
// carry their key the same way.
func TestKeySharedHandlesEachKeyInPublishOrder(t *testing.T) {
	e := newEnv(t)
	const keys, perKey = 40, 75
	var msgs []pulsartest.Message
	for seq := range perKey {
		for k := range keys {
			stream := fmt.Sprintf("k%d", k)
			m := pulsartest.Message{Payload: fmt.Appendf(nil, "%s|%d", stream, seq)}
			if seq%5 == 0 {
				m.Payload = fmt.Appendf(m.Payload, "|%s", bytes.Repeat([]byte{'x'}, 1100))
			}
			switch {
			case k%4 == 0: // an ordering key, and a key of its own for every message
				m.OrderingKey, m.Key = stream, fmt.Sprintf("other-%d-%d", k, seq)
			case k == 1: // no key at all
			default:
				m.Key = stream
			}
			msgs = append(msgs, m)
		}
	}
	if _, err := e.broker.Publish(context.Background(), "ks-order", msgs...); err != nil {
		t.Fatal(err)
	}
	log := newOrderLog()
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"ks-order"}, Subscription: "sub",
		SubscriptionType: bpulsar.KeyShared, Consumer: earliest()})
	stop := runOrdered(t, src, 2, log, func(md *bpulsar.Metadata) string {
		if md.OrderingKey != "" {
			return md.OrderingKey
		}
		return md.Key
	})
	wait.Within(t, waitLimit, "every message handled", func() bool { return log.count() >= len(msgs) })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	log.check(t)
}

// Guarantee: on an Exclusive or Failover subscription each partition's
// messages are handled in publish order, and their partition key is the
// partition's topic.
func TestExclusiveAndFailoverHandleEachPartitionInOrder(t *testing.T) {
	for _, typ := range []bpulsar.SubscriptionType{bpulsar.Exclusive, bpulsar.Failover} {
		t.Run(typ.String(), func(t *testing.T) {
			e := newEnv(t)
			const parts, perPart = 3, 500
			if err := e.broker.CreateTopic("part-order", parts); err != nil {
				t.Fatal(err)
			}
			for p := range parts {
				msgs := make([]pulsartest.Message, perPart)
				for seq := range msgs {
					msgs[seq] = pulsartest.Message{Payload: fmt.Appendf(nil, "%s|%d", pulsartest.PartitionTopic("part-order", p), seq)}
				}
				if _, err := e.broker.Publish(context.Background(), pulsartest.PartitionTopic("part-order", p), msgs...); err != nil {
					t.Fatal(err)
				}
			}
			log := newOrderLog()
			src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"part-order"}, Subscription: "sub",
				SubscriptionType: typ, Consumer: earliest()})
			stop := runOrdered(t, src, 1, log, func(md *bpulsar.Metadata) string { return md.Topic })
			wait.Within(t, waitLimit, "every message handled", func() bool { return log.count() >= parts*perPart })
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			log.check(t)
		})
	}
}

// Guarantee: on a Shared subscription, and with Unordered on a KeyShared
// one, the messages of one key are spread over the processors (several
// handle them at once), and a Shared subscription's messages carry no
// partition key.
func TestUnorderedSpreadsAKeyOverProcessors(t *testing.T) {
	for _, tc := range []struct {
		name      string
		typ       bpulsar.SubscriptionType
		unordered bool
		wantKey   string
	}{
		{"shared", bpulsar.Shared, false, ""},
		{"key_shared unordered", bpulsar.KeyShared, true, "k"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			msgs := make([]pulsartest.Message, 8)
			for i := range msgs {
				msgs[i] = pulsartest.Message{Key: "k", Payload: fmt.Appendf(nil, "k|%d", i)}
			}
			if _, err := e.broker.Publish(context.Background(), "spread", msgs...); err != nil {
				t.Fatal(err)
			}
			var running, most atomic.Int32
			together := newGate() // opens once two handlers run at once
			defer together.open()
			var handled atomic.Int32
			var badKey atomic.Value
			src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"spread"}, Subscription: "sub",
				SubscriptionType: tc.typ, Unordered: tc.unordered, Consumer: earliest()})
			_, stop := start(t, pipeline.Options[[]byte, []byte]{
				Name:     "pulsar-spread",
				Logger:   testLogger(),
				Producer: producer.Options[[]byte]{Source: src},
				Processors: processor.Options[[]byte, []byte]{Concurrency: 4, MaxDemand: 1,
					Handle: func(ctx context.Context, m *message.Message[[]byte]) ([]byte, error) {
						if k := m.PartitionKey(); k != tc.wantKey {
							badKey.Store(k)
						}
						n := running.Add(1)
						defer running.Add(-1)
						for cur := most.Load(); n > cur && !most.CompareAndSwap(cur, n); cur = most.Load() {
						}
						if n >= 2 {
							together.open()
						}
						select {
						case <-together.ch:
						case <-ctx.Done():
						}
						handled.Add(1)
						return m.Data, nil
					}},
			})
			wait.Within(t, waitLimit, "two processors to handle messages of one key at once",
				func() bool { return most.Load() >= 2 },
				func() string { return fmt.Sprintf("at most %d at once", most.Load()) })
			together.open()
			wait.Within(t, waitLimit, "every message handled", func() bool { return handled.Load() == int32(len(msgs)) })
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			if k := badKey.Load(); k != nil {
				t.Errorf("a message carried partition key %q, want %q", k, tc.wantKey)
			}
		})
	}
}
