package kafkatopic_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
)

// patience bounds every wait for something that must happen.
const patience = 30 * time.Second

// logBuffer collects log lines, safe for concurrent use.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// testOptions are the backend options most tests share.
func testOptions[T any](c *kfake.Cluster, codec topic.Codec[T]) kafkatopic.Options[T] {
	var brokers []string
	if c != nil {
		brokers = c.ListenAddrs()
	}
	return kafkatopic.Options[T]{
		Brokers:       brokers,
		Config:        testbroker.SaramaConfig(),
		Codec:         codec,
		AdminTimeout:  patience,
		RevokeTimeout: 2 * time.Second,
		Logger:        slog.New(slog.DiscardHandler),
	}
}

// newBackend starts a backend on c, closed when the test ends.
func newBackend[T any](t testing.TB, opts kafkatopic.Options[T]) *kafkatopic.Backend[T] {
	t.Helper()
	b, err := kafkatopic.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return b
}

// newTopic creates a topic on b, closed when the test ends.
func newTopic[T any](t testing.TB, b *kafkatopic.Backend[T], name topic.Name, o topic.Options) *topic.Handle[T] {
	t.Helper()
	h, err := topic.NewTopic(name, o, topic.Backend[T](b))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

func subscribe[T any](t testing.TB, h *topic.Handle[T], mode topic.SubscriptionMode) *topic.Subscription[T] {
	t.Helper()
	s, err := h.Subscribe(t.Context(), mode, topic.SubscriberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	t.Cleanup(cancel)
	return ctx
}

// recv receives one item within patience.
func recv[T any](t testing.TB, s *topic.Subscription[T]) topic.Item[T] {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	it, err := s.Receive(ctx)
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	return it
}

// hangKafkaFrom makes c stop answering, as testbroker.HangKafka does, from
// the first request of kind key on: that request is left unanswered until
// the test ends, and since the cluster handles one request at a time,
// every later one too. It returns a channel that receives when such a
// request arrives. c's Close must have been registered before.
func hangKafkaFrom(t testing.TB, c *kfake.Cluster, key kmsg.Key) <-chan struct{} {
	release := make(chan struct{})
	held := make(chan struct{}, 1)
	t.Cleanup(func() { close(release) })
	c.ControlKey(int16(key), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		select {
		case held <- struct{}{}:
		default:
		}
		<-release
		return nil, nil, false
	})
	return held
}
