package pulsar_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/validate"
)

// hourThenFast is a NackBackoffPolicy whose first delay (redelivery count
// 0) is an hour and every later one 30ms: pulsar-client-go ticks its nack
// tracker every third of the delay for count 1, so a nack whose deadline
// is due is redelivered within about 10ms, and one that is not waits the
// hour.
type hourThenFast struct{}

func (hourThenFast) Next(redeliveryCount uint32) time.Duration {
	if redeliveryCount == 0 {
		return time.Hour
	}
	return 30 * time.Millisecond
}

// receiveWithin returns the next message c receives, failing the test
// after waitLimit.
func receiveWithin(t *testing.T, c pulsar.Consumer, what string) pulsar.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	m, err := c.Receive(ctx)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return m
}

// Guarantee (of pulsar-client-go v0.21.0, which the source's rule on
// NackPrecisionBit rests on): the client rounds each nack deadline down to
// a multiple of 2^NackPrecisionBit milliseconds. A precision coarser than
// the delay rounds the deadline into the past, and the nacked message
// comes back on the tracker's next tick however long its delay; a
// precision of at most the delay keeps every deadline after the nack, and
// the message waits more than the delay less 2^bit ms.
func TestClientNackPrecisionBitRoundsEachDeadlineDown(t *testing.T) {
	e := newEnv(t)
	nackAndTime := func(t *testing.T, topic string, co pulsar.ConsumerOptions) time.Duration {
		t.Helper()
		e.publish(topic, "m", 1)
		co.Topic, co.SubscriptionName, co.Type = topic, "s", pulsar.Shared
		c, err := e.client.Subscribe(co)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		m := receiveWithin(t, c, "first delivery")
		begin := time.Now()
		c.Nack(m)
		again := receiveWithin(t, c, "redelivery")
		took := time.Since(begin)
		if string(again.Payload()) != string(m.Payload()) || again.RedeliveryCount() != 1 {
			t.Fatalf("got %q with redelivery count %d, want %q with count 1", again.Payload(), again.RedeliveryCount(), m.Payload())
		}
		return took
	}
	t.Run("coarser than the delay", func(t *testing.T) {
		// 2^42 ms is about 139 years: every deadline rounds down to
		// 1970, so the hour is lost (receiveWithin fails the test if
		// the message keeps to its hour).
		bit := int64(42)
		took := nackAndTime(t, "precision-coarse", pulsar.ConsumerOptions{
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
			NackBackoffPolicy:           hourThenFast{}, NackPrecisionBit: &bit,
		})
		t.Logf("a message nacked for an hour came back after %v", took)
	})
	t.Run("at most the delay", func(t *testing.T) {
		// 2^10 ms = 1024ms ≤ 1500ms: the deadline is at least 476ms
		// after the nack (a lower bound, which a busy machine only
		// lengthens).
		bit := int64(10)
		delay := 1500 * time.Millisecond
		took := nackAndTime(t, "precision-fine", pulsar.ConsumerOptions{
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
			NackRedeliveryDelay:         delay, NackPrecisionBit: &bit,
		})
		if floor := delay - (1<<bit)*time.Millisecond; took < floor {
			t.Fatalf("the message came back after %v, before the delay less the precision (%v)", took, floor)
		}
	})
}

// precisionOptions are valid source options with the consumer options co.
func precisionOptions(t *testing.T, co pulsar.ConsumerOptions) bpulsar.Options {
	return bpulsar.Options{Client: newIdleClient(t), Topics: []string{"a"}, Subscription: "s", Consumer: co}
}

func bitPtr(b int64) *int64 { return &b }

// Guarantee: Validate refuses a NackPrecisionBit set above the first nack
// delay (2^bit ms more than NackRedeliveryDelay, the client's one minute,
// the default backoff's 1s, or the first delay of the application's
// NackBackoffPolicy), with an error naming the field, the delay and the
// largest bit that keeps it; a precision of exactly the delay, and an
// unset one whatever the delay, are accepted.
func TestValidateRefusesNackPrecisionCoarserThanTheFirstNackDelay(t *testing.T) {
	cases := []struct {
		name string
		co   pulsar.ConsumerOptions
		text string // "" when the options are valid
	}{
		{"client defaults", pulsar.ConsumerOptions{}, ""},
		{"default backoff, default bit", pulsar.ConsumerOptions{EnableDefaultNackBackoffPolicy: true}, ""},
		{"short delay, bit unset", pulsar.ConsumerOptions{NackRedeliveryDelay: time.Millisecond}, ""},
		{"short policy, bit unset", pulsar.ConsumerOptions{NackBackoffPolicy: constBackoff(0)}, ""},
		{"delay of exactly 2^bit ms", pulsar.ConsumerOptions{NackRedeliveryDelay: 256 * time.Millisecond, NackPrecisionBit: bitPtr(8)}, ""},
		{"1ms at bit 0", pulsar.ConsumerOptions{NackRedeliveryDelay: time.Millisecond, NackPrecisionBit: bitPtr(0)}, ""},
		{"hour at bit 21", pulsar.ConsumerOptions{NackRedeliveryDelay: time.Hour, NackPrecisionBit: bitPtr(21)}, ""},
		{"client's 8 above the delay", pulsar.ConsumerOptions{NackRedeliveryDelay: 255 * time.Millisecond, NackPrecisionBit: bitPtr(8)},
			"must be at most 7 (2^bit ms at most 255ms, the first nack delay, nackRedeliveryDelay; or unset)"},
		{"bit above the delay", pulsar.ConsumerOptions{NackRedeliveryDelay: 100 * time.Millisecond, NackPrecisionBit: bitPtr(7)},
			"must be at most 6 (2^bit ms at most 100ms, the first nack delay, nackRedeliveryDelay; or unset)"},
		{"bit above the client's minute", pulsar.ConsumerOptions{NackPrecisionBit: bitPtr(16)},
			"must be at most 15 (2^bit ms at most 1m0s, the first nack delay, the client's default nackRedeliveryDelay; or unset)"},
		{"bit above the default backoff", pulsar.ConsumerOptions{EnableDefaultNackBackoffPolicy: true, NackPrecisionBit: bitPtr(10)},
			"must be at most 9 (2^bit ms at most 1s, the first nack delay, the default nack backoff's; or unset)"},
		{"bit above the policy's first delay", pulsar.ConsumerOptions{NackBackoffPolicy: constBackoff(50 * time.Millisecond), NackRedeliveryDelay: time.Hour, NackPrecisionBit: bitPtr(6)},
			"must be at most 5 (2^bit ms at most 50ms, the first nack delay, nackBackoffPolicy.Next(0); or unset)"},
		{"bit above a policy below 1ms", pulsar.ConsumerOptions{NackBackoffPolicy: constBackoff(-1), NackPrecisionBit: bitPtr(1)},
			"must be at most 0 (2^bit ms at most 1ms"},
		{"bit above a panicking policy's fallback", pulsar.ConsumerOptions{NackBackoffPolicy: &panickingBackoff{}, NackRedeliveryDelay: 100 * time.Millisecond, NackPrecisionBit: bitPtr(8)},
			"must be at most 6 (2^bit ms at most 100ms, the first nack delay, nackBackoffPolicy.Next(0); or unset)"},
		{"bit past any duration", pulsar.ConsumerOptions{NackRedeliveryDelay: time.Duration(math.MaxInt64), NackPrecisionBit: bitPtr(64)},
			"must be at most 43"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := bpulsar.New(precisionOptions(t, tc.co)).Validate()
			if tc.text == "" {
				if err != nil {
					t.Fatalf("valid options refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("options accepted; want an error saying %q", tc.text)
			}
			var es validate.Errors
			if !errors.As(err, &es) || !es.Has("pulsar.consumer.nackPrecisionBit", "precision") {
				t.Fatalf("want an error on pulsar.consumer.nackPrecisionBit (rule precision), got %v", err)
			}
			if !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("error %q does not say %q", err, tc.text)
			}
		})
	}
}

// constBackoff is a NackBackoffPolicy with one delay for every count.
type constBackoff time.Duration

func (b constBackoff) Next(uint32) time.Duration { return time.Duration(b) }

// Guarantee: pipeline.New refuses, before any goroutine starts, a Pulsar
// source whose NackPrecisionBit would bring a message nacked for an hour
// back on the client's next tick.
func TestPipelineNewRefusesANackPrecisionThatRoundsTheDelayAway(t *testing.T) {
	co := earliest()
	co.NackBackoffPolicy = hourThenFast{}
	co.NackPrecisionBit = bitPtr(42)
	src := bpulsar.New(precisionOptions(t, co))
	_, err := pipeline.New(pipeline.Options[[]byte, []byte]{
		Name:       "pulsar-test",
		Logger:     testLogger(),
		Producer:   producer.Options[[]byte]{Source: src},
		Processors: processor.Options[[]byte, []byte]{Handle: func(context.Context, *message.Message[[]byte]) ([]byte, error) { return nil, nil }},
	})
	var es validate.Errors
	if !errors.As(err, &es) || !es.Has("pulsar.consumer.nackPrecisionBit", "precision") {
		t.Fatalf("pipeline.New returned %v, want an error on pulsar.consumer.nackPrecisionBit (rule precision)", err)
	}
}

// recordingClient is a client that records the options of every
// subscription, then subscribes through the client it wraps. What it
// records is behind a pointer: validation (the required rule on
// Options.Client) copies the struct a client points to.
type recordingClient struct {
	pulsar.Client
	rec *subscriptions
}

// subscriptions are the options a recordingClient subscribed with.
type subscriptions struct {
	mu  sync.Mutex
	got []pulsar.ConsumerOptions
}

func (c *recordingClient) Subscribe(o pulsar.ConsumerOptions) (pulsar.Consumer, error) {
	c.rec.mu.Lock()
	c.rec.got = append(c.rec.got, o)
	c.rec.mu.Unlock()
	return c.Client.Subscribe(o)
}

// bits returns the NackPrecisionBit every subscription so far gave the
// client (the client's default, 8, for unset).
func (c *recordingClient) bits() []int64 {
	c.rec.mu.Lock()
	defer c.rec.mu.Unlock()
	var out []int64
	for _, o := range c.rec.got {
		b := int64(8)
		if o.NackPrecisionBit != nil {
			b = *o.NackPrecisionBit
		}
		out = append(out, b)
	}
	return out
}

// Guarantee: with NackPrecisionBit unset, the source gives the client its
// default, 8 (256ms), only when the first nack delay is at least 256ms, and
// otherwise the largest bit whose 2^bit ms is at most that delay, so that
// no nack deadline rounds to or before the nack; a bit the application
// sets is passed as it is.
func TestSourceGivesTheClientANackPrecisionWithinTheFirstNackDelay(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		name string
		co   pulsar.ConsumerOptions
		want int64
	}{
		{"client defaults", pulsar.ConsumerOptions{}, 8},
		{"default backoff", pulsar.ConsumerOptions{EnableDefaultNackBackoffPolicy: true}, 8},
		{"256ms", pulsar.ConsumerOptions{NackRedeliveryDelay: 256 * time.Millisecond}, 8},
		{"255ms", pulsar.ConsumerOptions{NackRedeliveryDelay: 255 * time.Millisecond}, 7},
		{"100ms", pulsar.ConsumerOptions{NackRedeliveryDelay: 100 * time.Millisecond}, 6},
		{"1ms", pulsar.ConsumerOptions{NackRedeliveryDelay: time.Millisecond}, 0},
		{"policy of 20ms", pulsar.ConsumerOptions{NackRedeliveryDelay: time.Hour, NackBackoffPolicy: constBackoff(20 * time.Millisecond)}, 4},
		{"policy below 1ms", pulsar.ConsumerOptions{NackBackoffPolicy: constBackoff(0)}, 0},
		{"set", pulsar.ConsumerOptions{NackRedeliveryDelay: 100 * time.Millisecond, NackPrecisionBit: bitPtr(3)}, 3},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rc := &recordingClient{Client: e.client, rec: &subscriptions{}}
			topic := fmt.Sprintf("precision-%d", i)
			src := bpulsar.New(bpulsar.Options{Client: rc, Topics: []string{topic}, Subscription: "s", Consumer: tc.co})
			_, stop := run(t, src, 1, producer.Flow{}, func(context.Context, *message.Message[[]byte]) ([]byte, error) { return nil, nil })
			wait.Within(t, waitLimit, "the source subscribed", func() bool { return len(rc.bits()) > 0 })
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			for _, got := range rc.bits() {
				if got != tc.want {
					t.Fatalf("the client was given NackPrecisionBit %d, want %d", got, tc.want)
				}
			}
		})
	}
}
