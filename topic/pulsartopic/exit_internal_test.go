package pulsartopic

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topictest"
)

// Guarantee: when the codec ends the receiving goroutine (runtime.Goexit)
// on a message, the messages that Receive took before it, which no caller
// gets, are nacked: the broker delivers them again, and a later Receive
// gets them.
func TestDecodeGoexitNacksTheMessagesTakenBeforeIt(t *testing.T) {
	b, be, st, ss := balancedOnBroker(t, topictest.ExitingCodec[int]{Codec: topic.IntCodec{}}, 50*time.Millisecond)
	s := ss.(*pSub[int])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := st.Publish(ctx, topic.Envelope[int]{Value: 8}, topic.Block); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Publish(ctx, be.TopicName("t"), pulsartest.Message{Payload: []byte("not an int")}); err != nil {
		t.Fatal(err)
	}
	wait.Within(t, 20*time.Second, "both messages in the consumer's channel", func() bool { return len(s.ch) == 2 })
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		n, err := s.Receive(ctx, make([]topic.Envelope[int], 10))
		t.Errorf("Receive returned %d, %v; want the codec's exit to end the goroutine", n, err)
	}()
	<-exited
	dst := make([]topic.Envelope[int], 1)
	n, err := s.Receive(ctx, dst)
	if err != nil || n != 1 || dst[0].Value != 8 {
		t.Fatalf("Receive = %d %+v, %v; want 8 again", n, dst[0], err)
	}
	if err := s.Settle(dst[0].ID, nil); err != nil {
		t.Fatal(err)
	}
	wait.Within(t, 20*time.Second, "both messages acked", func() bool { return b.Backlog(be.TopicName("t"), "g") == 0 })
}

// balancedOnBroker starts a pulsartest broker, a backend on it with codec
// and nackDelay, its topic "t" and a balanced subscription of group "g"
// to it, all closed at t's cleanup.
func balancedOnBroker(t *testing.T, codec topic.Codec[int], nackDelay time.Duration) (*pulsartest.Broker, *Backend[int], topic.State[int], topic.SubscriptionState[int]) {
	t.Helper()
	return subscribedOnBroker(t, codec, nackDelay, topic.Options{}, topic.Balanced("g"))
}

// subscribedOnBroker is balancedOnBroker with the topic's options opts
// (defaults applied) and a subscription of mode.
func subscribedOnBroker(t *testing.T, codec topic.Codec[int], nackDelay time.Duration, opts topic.Options, mode topic.SubscriptionMode) (*pulsartest.Broker, *Backend[int], topic.State[int], topic.SubscriptionState[int]) {
	t.Helper()
	b, err := pulsartest.Start(context.Background(), pulsartest.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	be, err := New(Options[int]{ServiceURL: b.URL(), Codec: codec, SendTimeout: -1, NackRedeliveryDelay: nackDelay,
		ClientOptions: pulsar.ClientOptions{OperationTimeout: 5 * time.Second}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close(context.Background()) })
	st, err := be.NewTopic(context.Background(), "t", opts.WithDefaults())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ss, err := st.Subscribe(t.Context(), mode, topic.SubscriberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	return b, be, st, ss
}
