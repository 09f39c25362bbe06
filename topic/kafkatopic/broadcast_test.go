package kafkatopic_test

import (
	"context"
	"errors"
	"testing"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
)

// lagSetup publishes n records to a one-partition broadcast topic whose
// subscriber has read none, with fetch buffers so small that the
// subscriber holds only a few of them, then deletes the records below
// offset cut, as retention would.
func lagSetup(t *testing.T, onLag topic.OnLag, n, cut int) (*topic.Handle[int], *topic.Subscription[int]) {
	t.Helper()
	c := testbroker.Kafka(t)
	o := testOptions[int](c, topic.IntCodec{})
	o.Config.ChannelBufferSize = 1
	o.Config.Consumer.Fetch.Default = 1 // one record batch per fetch
	b := newBackend(t, o)
	h := newTopic(t, b, "lag", topic.Options{Mode: topic.BroadcastOnly,
		Broadcast: topic.BroadcastPolicy{Capacity: 2, OnLag: onLag}})
	s := subscribe(t, h, topic.Broadcast())
	for i := range n {
		if err := h.Publish(ctxT(t), i); err != nil {
			t.Fatal(err)
		}
	}
	admin, err := sarama.NewClusterAdmin(c.ListenAddrs(), testbroker.SaramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.DeleteRecords("lag", map[int32]int64{0: int64(cut)}); err != nil {
		t.Fatal(err)
	}
	return h, s
}

// Broadcast drop_oldest: a subscriber that fell below the log start gets a
// lag notice with the number of records it missed and continues from the
// oldest record kept; what it received plus what it missed is every
// record, in order.
func TestBroadcastLagBelowLogStart(t *testing.T) {
	const n, cut = 40, 30
	h, s := lagSetup(t, topic.DropOldest, n, cut)
	next, lagged := 0, uint64(0)
	for next < n {
		it := recv(t, s)
		if it.Lagged > 0 {
			lagged += it.Lagged
			next += int(it.Lagged)
			continue
		}
		if it.Value != next {
			t.Fatalf("received %d, want %d (missed %d so far)", it.Value, next, lagged)
		}
		next++
	}
	if lagged == 0 {
		t.Fatal("no lag notice: the subscriber never fell below the log start")
	}
	if next != n {
		t.Fatalf("received and missed %d records, want %d", next, n)
	}
	if st := h.Stats(); st.Lagged != lagged {
		t.Fatalf("Stats.Lagged = %d, want %d", st.Lagged, lagged)
	}
	if err := h.Publish(ctxT(t), n); err != nil {
		t.Fatal(err)
	}
	if it := recv(t, s); it.Value != n {
		t.Fatalf("after the lag received %+v, want %d", it, n)
	}
}

// Broadcast disconnect: a subscriber that fell below the log start gets
// one final lag notice counting everything it had not read, then
// ErrSubscriptionClosed.
func TestBroadcastDisconnectBelowLogStart(t *testing.T) {
	const n, cut = 40, 30
	h, s := lagSetup(t, topic.Disconnect, n, cut)
	next := 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		it, err := s.Receive(ctx)
		cancel()
		if err != nil {
			t.Fatalf("Receive after %d: %v, want a final lag notice first", next, err)
		}
		if it.Lagged > 0 {
			if next+int(it.Lagged) != n {
				t.Fatalf("final notice missed %d after %d received, want %d in all", it.Lagged, next, n)
			}
			break
		}
		if it.Value != next {
			t.Fatalf("received %d, want %d", it.Value, next)
		}
		next++
	}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if _, err := s.Receive(ctx); !errors.Is(err, topic.ErrSubscriptionClosed) {
		t.Fatalf("Receive after the final notice = %v, want ErrSubscriptionClosed", err)
	}
	if st := h.Stats(); st.Lagged != uint64(n-next) || st.BroadcastSubscribers != 0 {
		t.Fatalf("Stats = %+v, want Lagged %d and no connected subscriber", st, n-next)
	}
}
