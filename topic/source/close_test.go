package source_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
)

// Guarantee: closing the source leaves the topic: its consumer group
// membership and broadcast subscription end.
func TestCloseLeavesTopic(t *testing.T) {
	for _, mode := range []topic.SubscriptionMode{topic.Balanced("g"), topic.Broadcast()} {
		o := topic.Options{Mode: topic.Mixed}
		h := newTopic(t, "t", o)
		src := newSource(t, h, mode)
		if st := h.Stats(); st.BalancedGroups+st.BroadcastSubscribers != 1 {
			t.Fatalf("%v: stats after New %+v, want one subscription", mode, st)
		}
		if err := src.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if st := h.Stats(); st.BalancedGroups != 0 || st.BroadcastSubscribers != 0 {
			t.Fatalf("%v: stats after Close %+v, want no subscription left", mode, st)
		}
		h.Close()
	}
}

// Guarantee: Close returns by its context's deadline, with an error
// wrapping ctx.Err(), when closing a subscription waits on a backend that
// does not answer (a group member of a Kafka topic whose cluster stopped
// responding: its leave is bounded only by kafkatopic's AdminTimeout, here
// far beyond the deadline); a later Close waits for the same closing and
// returns nil once it has ended.
func TestCloseReturnsByItsDeadlineWhenTheBackendHangs(t *testing.T) {
	c := testbroker.Kafka(t)
	b, err := kafkatopic.New(kafkatopic.Options[int]{
		Brokers:      c.ListenAddrs(),
		Config:       testbroker.SaramaConfig(),
		Codec:        topic.IntCodec{},
		AdminTimeout: 2 * time.Minute,
		Logger:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	h, err := topic.NewTopic[int]("hung", topic.Options{Mode: topic.Mixed}, topic.Backend[int](b))
	if err != nil {
		t.Fatal(err)
	}
	src := newSource(t, h, topic.Balanced("g"))
	testbroker.HangKafka(t, c)

	testbroker.ReturnsByDeadline(t, "Close", src.Close)
	// Closing the backend past its deadline cuts every connection, so that
	// the closing left running ends before the test does.
	bctx, bcancel := context.WithTimeout(context.Background(), time.Second)
	defer bcancel()
	_ = b.Close(bctx)
	later, lcancel := context.WithTimeout(context.Background(), testbroker.HungGrace)
	defer lcancel()
	if err := src.Close(later); err != nil {
		t.Errorf("a later Close, once the backend cut its connections = %v, want nil", err)
	}
	h.Close()
}
