package pulsartopology_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/internal/readertest"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/pulsartopology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// revoked is a refusal pulsar-client-go does not retry: a consumer whose
// resubscription the broker answers so is closed by the client.
var revoked = &pulsartest.ServerError{Code: pulsartest.AuthorizationError, Message: "authorization revoked"}

// Guarantee: when pulsar-client-go closes a reader's consumer by itself
// (here the broker refuses its resubscription for good after the
// connection dropped), a group reader's or a dead-letter reader's Receive
// waiting returns at once an error wrapping ErrConsumerClosed and the
// client's cause, and so do every later Receive and TryReceive, and one
// ERROR line names the subscription; Close still returns quietly
// afterwards.
func TestReaderReceiveFailsOnceTheClientClosedItsConsumer(t *testing.T) {
	for name, c := range map[string]struct {
		dead bool
		sub  string
	}{
		"group":       {sub: "revoked"},
		"dead-letter": {dead: true, sub: pulsartopology.DeadSubscription},
	} {
		t.Run(name, func(t *testing.T) {
			b := testbroker.Pulsar(t)
			var lines logtest.Lines
			o := options(b, topic.IntCodec{})
			o.Logger = slog.New(slog.NewTextHandler(&lines, nil))
			be := newBackend(t, o)
			top := build(t, topology.New("revoked").DLQ())
			q, r := declared(t, be, top)
			topicName := be.TopicName("revoked")
			if c.dead {
				var err error
				if r, err = q.SubscribeDead(ctxT(t)); err != nil {
					t.Fatal(err)
				}
				dlq, _ := top.DLQ()
				topicName = be.TopicName(dlq)
			}

			b.RefuseSubscribe(topicName, c.sub, revoked)
			reconnected := dropConnections(t, b)
			dst := make([]topology.Letter[int], 4)
			_, err := r.Receive(ctxT(t), dst)
			if !errors.Is(err, pulsartopology.ErrConsumerClosed) {
				t.Fatalf("Receive = %v, want an error wrapping ErrConsumerClosed", err)
			}
			t.Logf("Receive: %v", err)
			if _, again := r.Receive(ctxT(t), dst); !errors.Is(again, pulsartopology.ErrConsumerClosed) {
				t.Fatalf("a later Receive = %v, want ErrConsumerClosed again", again)
			}
			if _, try := r.TryReceive(ctxT(t), dst); !errors.Is(try, pulsartopology.ErrConsumerClosed) {
				t.Fatalf("TryReceive = %v, want ErrConsumerClosed", try)
			}
			topologytest.MustClose(t, "the reader", r.Close)
			lines.Want(t, 1, "the lost consumer's line", "level=ERROR", "closed the reader's consumer", "subscription="+c.sub, "AuthorizationError")
			reconnected()
		})
	}
}

// dropConnections drops every connection of b, and returns what waits
// for the producers open then, which nothing refuses, to be open again:
// a producer's reconnection still under way as the test ends would
// outlive the backend's client, and goleak would report it.
func dropConnections(t *testing.T, b *pulsartest.Broker) (reconnected func()) {
	producers := b.Stats().ProducersOpen
	b.DropConnections()
	return func() {
		t.Helper()
		wait.Within(t, 30*time.Second, "the backend's producers to reconnect", func() bool {
			return b.Stats().ProducersOpen >= producers
		})
	}
}

// Guarantee: a dead-letter reader's TryReceive waiting for its marker to
// come back from the DLQ stops waiting once pulsar-client-go closes the
// reader's consumer by itself (the marker cannot come back through it): it
// returns an error wrapping ErrConsumerClosed, long before
// Options.OperationTimeout, and not ErrCatchUp when its context ends.
func TestDeadReaderCatchUpEndsOnceTheClientClosedItsConsumer(t *testing.T) {
	b := testbroker.Pulsar(t)
	o := options(b, topic.IntCodec{})
	o.OperationTimeout = time.Hour // far beyond the TryReceive's context
	be := newBackend(t, o)
	top := build(t, topology.New("catchup").DLQ())
	q, _ := declared(t, be, top)
	r, err := q.SubscribeDead(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	dlqName, _ := top.DLQ()
	dlq := be.TopicName(dlqName)
	b.StallDispatch(dlq, true) // the marker stays on the broker
	done := make(chan error, 1)
	ctx := ctxT(t)
	go func() {
		_, err := r.TryReceive(ctx, make([]topology.Letter[int], 1))
		done <- err
	}()
	wait.Within(t, patience, "the marker stored on the DLQ", func() bool {
		for _, m := range b.Messages(dlq) {
			if _, ok := m.Properties[pulsartopology.PropMarker]; ok {
				return true
			}
		}
		return false
	})

	b.RefuseSubscribe(dlq, pulsartopology.DeadSubscription, revoked)
	reconnected := dropConnections(t, b)
	if err := <-done; !errors.Is(err, pulsartopology.ErrConsumerClosed) {
		t.Fatalf("TryReceive waiting for its marker = %v, want an error wrapping ErrConsumerClosed", err)
	}
	topologytest.MustClose(t, "the reader", r.Close)
	reconnected()
}

// Guarantee: a pipeline reading a Pulsar topology through a topology
// source, whose group reader's consumer pulsar-client-go closed by itself,
// does not stay running with nothing to read: its run fails with an error
// wrapping ErrConsumerClosed, the stage restarts and subscribes a new
// reader (the restarted runs fail while the broker still refuses), and
// once the broker accepts the subscription again every letter published
// from then on is handled.
func TestTopologySourceSubscribesANewReaderOnceTheClientClosedItsConsumer(t *testing.T) {
	b := testbroker.Pulsar(t)
	var lines logtest.Lines
	log := slog.New(slog.NewTextHandler(&lines, nil))
	o := options(b, topic.Codec[topologytest.Msg](topic.JSONCodec[topologytest.Msg]{}))
	o.Logger = log
	be := newBackend(t, o)
	q, err := be.Declare(ctxT(t), build(t, topology.New("lost")))
	if err != nil {
		t.Fatal(err)
	}
	src, err := topology.NewSource(topology.SourceOptions[topologytest.Msg]{Queues: q, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	r := readertest.Run(t, "lost", src, func(m topologytest.Msg) int { return m.N }, log)
	full := be.TopicName("lost")
	publish := func(from, to int) {
		t.Helper()
		for v := from; v < to; v++ {
			payload, _ := json.Marshal(topologytest.Msg{N: v})
			// Through the broker's API: the backend's producer may be
			// reconnecting.
			if _, err := b.Publish(ctxT(t), full, pulsartest.Message{Payload: payload}); err != nil {
				t.Fatal(err)
			}
		}
	}
	publish(0, 5)
	wait.Within(t, patience, "the letters published first", func() bool { return r.Handled() == 5 }, r.String)

	b.RefuseSubscribe(full, "lost", revoked)
	b.DropConnections()
	wait.Within(t, patience, "the run to fail with ErrConsumerClosed", func() bool {
		return r.Status().Restarts >= 1 && lines.Count("level=ERROR", "closed the reader's consumer") > 0
	}, r.String)
	b.RefuseSubscribe(full, "lost", nil)
	publish(5, 10)
	wait.Within(t, patience, "every letter published after the consumer was closed", func() bool { return r.Handled() == 10 },
		func() string { return fmt.Sprintf("%s, last error %v", r.String(), r.Status().LastError) })
}

// Guarantee: Options.MaxReconnectToBroker reaches every reader's consumer.
// Set to 1, the client gives up on a consumer whose first reconnection the
// broker refuses (a refusal it would retry): Receive fails with
// ErrConsumerClosed and the client's cause. With the default the consumer
// goes on reconnecting past such refusals, and receives what is published
// once the broker accepts it again.
func TestMaxReconnectToBrokerBoundsTheReadersReconnections(t *testing.T) {
	for name, max := range map[string]int{"1": 1, "default": 0} {
		t.Run(name, func(t *testing.T) {
			b := testbroker.Pulsar(t)
			o := options(b, topic.IntCodec{})
			o.MaxReconnectToBroker = max
			be := newBackend(t, o)
			_, r := declared(t, be, build(t, topology.New("flaky")))
			full := be.TopicName("flaky")
			dst := make([]topology.Letter[int], 4)
			// receive publishes v and returns once the reader has received
			// it, settling what it receives.
			receive := func(v int) error {
				t.Helper()
				payload, _ := topic.IntCodec{}.Encode(v)
				if _, err := b.Publish(ctxT(t), full, pulsartest.Message{Payload: payload}); err != nil {
					t.Fatal(err)
				}
				for {
					n, err := r.Receive(ctxT(t), dst)
					if err != nil {
						return err
					}
					for i := range n {
						_ = r.Settle(ctxT(t), &dst[i])
						if dst[i].Value == v {
							return nil
						}
					}
				}
			}
			if err := receive(1); err != nil { // the consumer is subscribed
				t.Fatal(err)
			}

			refused := b.Stats().SubscribesRefused
			b.RefuseSubscribe(full, "flaky", errors.New("not now"))
			b.DropConnections()
			if max == 1 {
				_, err := r.Receive(ctxT(t), dst)
				if !errors.Is(err, pulsartopology.ErrConsumerClosed) || !strings.Contains(err.Error(), "max retry attempts") {
					t.Fatalf("Receive = %v, want ErrConsumerClosed with the client's cause", err)
				}
				return
			}
			wait.Within(t, patience, "two reconnections refused", func() bool { return b.Stats().SubscribesRefused >= refused+2 })
			b.RefuseSubscribe(full, "flaky", nil)
			if err := receive(2); err != nil {
				t.Fatalf("Receive after the broker accepted the consumer again: %v", err)
			}
		})
	}
}

// Guarantee: Options.MaxReconnectToBroker reaches a broadcast reader's
// and a dead-letter reader's consumer as it does a group reader's: set to
// 1, the client gives up on either once the broker refuses its first
// reconnection (a refusal it would retry), and Receive fails with
// ErrConsumerClosed and the client's cause.
func TestMaxReconnectToBrokerBoundsBroadcastAndDeadReaders(t *testing.T) {
	for _, kind := range []string{"broadcast", "dead"} {
		t.Run(kind, func(t *testing.T) {
			b := testbroker.Pulsar(t)
			o := options(b, topic.IntCodec{})
			o.MaxReconnectToBroker = 1
			be := newBackend(t, o)
			var (
				r         topology.Reader[int]
				full, sub string
			)
			if kind == "broadcast" {
				_, r = declared(t, be, build(t, topology.New("flaky").Broadcast()))
				full = be.TopicName("flaky")
				for _, s := range b.Subscriptions(full) {
					if strings.HasPrefix(s, pulsartopology.BroadcastPrefix) {
						sub = s
					}
				}
				if sub == "" {
					t.Fatalf("no broadcast subscription on %s: %q", full, b.Subscriptions(full))
				}
			} else {
				top := build(t, topology.New("flaky").DLQ())
				q, _ := declared(t, be, top)
				var err error
				if r, err = q.SubscribeDead(ctxT(t)); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { topologytest.MustClose(t, "the dead-letter reader", r.Close) })
				dlq, _ := top.DLQ()
				full, sub = be.TopicName(dlq), pulsartopology.DeadSubscription
			}

			b.RefuseSubscribe(full, sub, errors.New("not now"))
			reconnected := dropConnections(t, b)
			_, err := r.Receive(ctxT(t), make([]topology.Letter[int], 1))
			if !errors.Is(err, pulsartopology.ErrConsumerClosed) || !strings.Contains(err.Error(), "max retry attempts") {
				t.Fatalf("Receive = %v, want ErrConsumerClosed with the client's cause", err)
			}
			reconnected()
		})
	}
}

// Guarantee: the letters a group reader handed out before it reported
// that pulsar-client-go closed its consumer by itself (a refusal the
// client does not retry, or Options.MaxReconnectToBroker reached),
// letters the consumer had received before it lost its connection
// included, cannot be settled through that consumer once it is closed:
// Settle returns an error for each, never nil for an acknowledgement
// that went nowhere; the reader's Close returns; and the broker delivers
// every letter again to the group's next reader.
func TestLettersOfAConsumerTheClientClosedAreDeliveredAgainNotSettled(t *testing.T) {
	for name, c := range map[string]struct {
		refusal      error
		maxReconnect int
	}{
		"refused for good":      {refusal: revoked},
		"reconnections used up": {refusal: errors.New("not now"), maxReconnect: 1},
	} {
		t.Run(name, func(t *testing.T) {
			b := testbroker.Pulsar(t)
			o := options(b, topic.IntCodec{})
			o.MaxReconnectToBroker = c.maxReconnect
			be := newBackend(t, o)
			q, r := declared(t, be, build(t, topology.New("gone")))
			full := be.TopicName("gone")
			const letters = 3
			for v := range letters {
				payload, _ := topic.IntCodec{}.Encode(v)
				if _, err := b.Publish(ctxT(t), full, pulsartest.Message{Payload: payload}); err != nil {
					t.Fatal(err)
				}
			}
			wait.Within(t, patience, "every letter dispatched to the reader's consumer", func() bool {
				var n int64
				for _, cs := range b.Consumers(full, "gone") {
					n += cs.Dispatched
				}
				return n == letters
			})
			var held []topology.Letter[int]
			dst := make([]topology.Letter[int], 1)
			if n, err := r.Receive(ctxT(t), dst); n != 1 || err != nil {
				t.Fatalf("Receive = %d, %v; want 1 letter", n, err)
			}
			held = append(held, dst[0])

			b.RefuseSubscribe(full, "gone", c.refusal)
			reconnected := dropConnections(t, b)
			for {
				n, err := r.Receive(ctxT(t), dst)
				if errors.Is(err, pulsartopology.ErrConsumerClosed) {
					break
				}
				if err != nil {
					t.Fatalf("Receive = %v, want letters then ErrConsumerClosed", err)
				}
				held = append(held, dst[:n]...)
			}
			for i := range held {
				err := r.Settle(ctxT(t), &held[i])
				if err == nil {
					t.Fatalf("Settle of letter %d through the closed consumer = nil; want an error: its acknowledgement cannot reach the broker", held[i].Value)
				}
				t.Logf("Settle of letter %d: %v", held[i].Value, err)
			}
			topologytest.MustClose(t, "the reader", r.Close)
			if got := b.Backlog(full, "gone"); got != letters {
				t.Fatalf("backlog %d once the closed consumer's letters were settled; want %d, none acknowledged", got, letters)
			}

			b.RefuseSubscribe(full, "gone", nil)
			next, err := q.Subscribe(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			seen := map[int]bool{}
			all := make([]topology.Letter[int], letters)
			for len(seen) < letters {
				n, err := next.Receive(ctxT(t), all)
				if err != nil {
					t.Fatalf("the next reader's Receive: %v", err)
				}
				for i := range n {
					seen[all[i].Value] = true
					if err := next.Settle(ctxT(t), &all[i]); err != nil {
						t.Fatalf("the next reader's Settle: %v", err)
					}
				}
			}
			wait.Within(t, patience, "the next reader's acknowledgements", func() bool { return b.Backlog(full, "gone") == 0 })
			reconnected()
		})
	}
}
