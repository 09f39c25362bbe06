package kafkatopology

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: when the cluster stops answering, Declare, a group reader's
// and a broadcast reader's Subscribe and SubscribeDead each return by
// their context's deadline (1s, far below AdminTimeout and sarama's
// Net.ReadTimeout, 30s each) with an error wrapping it, and what they
// left running (their clients' first requests, cut at the deadline) ends
// soon after: none of their goroutines is left, while the backend stays
// open.
func TestDeclareAndSubscribeReturnByTheirDeadlineWhenTheClusterHangs(t *testing.T) {
	c := testbroker.Kafka(t)
	b := newBackend(t, c.ListenAddrs())
	q := declare(t, b, topology.New("hung").DLQ())
	bq := declare(t, b, topology.New("hung-all").Broadcast())
	top, err := topology.New("hung-new").Hold(time.Second).DLQ().Build()
	if err != nil {
		t.Fatal(err)
	}
	testbroker.HangKafka(t, c)
	before := goleak.IgnoreCurrent()
	subscribing := func(sub func(context.Context) (topology.Reader[msg], error)) func(context.Context) error {
		return func(ctx context.Context) error {
			r, err := sub(ctx)
			if err == nil {
				t.Errorf("a Subscribe with the cluster hung made a reader")
				_ = r.Close(ctx)
			}
			return err
		}
	}
	for _, call := range []struct {
		what string
		do   func(context.Context) error
	}{
		{"Declare", func(ctx context.Context) error {
			_, err := b.Declare(ctx, top)
			return err
		}},
		{"a group reader's Subscribe", subscribing(q.Subscribe)},
		{"a broadcast reader's Subscribe", subscribing(bq.Subscribe)},
		{"SubscribeDead", subscribing(q.SubscribeDead)},
	} {
		if !testbroker.ReturnsByDeadline(t, call.what, call.do) {
			t.FailNow()
		}
	}
	noneLeft(t, "the calls cut short to end", before)
}

// Guarantee: when the cluster stops answering, a group reader's
// TryReceive returns by Options.AdminTimeout (here 1s, far below sarama's
// Net.ReadTimeout, 30s) with an error wrapping ErrCatchUp and
// context.DeadlineExceeded, though it asks the log ends through the
// backend's shared client and the cluster does not answer; what it left
// asking, on a goroutine of the backend, ends with the backend's Close,
// cut at its deadline: none of their goroutines is left.
func TestTryReceiveReturnsByTheAdminTimeoutWhenTheClusterHangs(t *testing.T) {
	tryReceiveHung(t, "hung-try", true)
}

// noneLeft waits for every goroutine started after before to end, but
// those of the hung cluster itself.
func noneLeft(t *testing.T, what string, before goleak.Option) {
	t.Helper()
	opts := append(hungCluster(), before)
	var left error
	wait.For(t, what, func() bool {
		left = goleak.Find(opts...)
		return left == nil
	}, func() string { return left.Error() })
}

// Guarantee: when the cluster stops answering, a group reader's
// TryReceive returns by its context's deadline (1s, far below
// Options.AdminTimeout, 30s here, and sarama's Net.ReadTimeout) with an
// error wrapping ErrCatchUp and context.DeadlineExceeded; what it left
// asking ends with the backend's Close, cut at its deadline: none of
// their goroutines is left.
func TestTryReceiveReturnsByItsDeadlineWhenTheClusterHangs(t *testing.T) {
	tryReceiveHung(t, "hung-try-ctx", false)
}

// tryReceiveHung has a group reader of topic name catch up, hangs the
// cluster and checks that TryReceive returns by testbroker.HungDeadline
// with an error wrapping ErrCatchUp: by Options.AdminTimeout, set to it,
// when byAdmin, else by its context's deadline; then that the backend's
// Close returns by its deadline and leaves no goroutine.
func tryReceiveHung(t *testing.T, name string, byAdmin bool) {
	t.Helper()
	before := goleak.IgnoreCurrent()
	c := testbroker.Kafka(t)
	b := newBackend(t, c.ListenAddrs())
	r := subscribe(t, declare(t, b, topology.New(name)))
	buf := make([]topology.Letter[msg], 1)
	wait.For(t, "the reader to join its group and catch up with the log", func() bool {
		_, err := r.TryReceive(t.Context(), buf)
		return err == nil
	})
	if byAdmin {
		// Nothing else reads it now: the reader's one session has
		// claimed its partition, and no Declare or Subscribe runs.
		b.opts.AdminTimeout = testbroker.HungDeadline
	}
	testbroker.HangKafka(t, c)
	if !testbroker.ReturnsByDeadline(t, "TryReceive", func(ctx context.Context) error {
		if byAdmin {
			ctx = t.Context()
		}
		_, err := r.TryReceive(ctx, buf)
		if err != nil && !errors.Is(err, ErrCatchUp) {
			t.Errorf("TryReceive with the cluster hung = %v, want an error wrapping ErrCatchUp", err)
		}
		return err
	}) {
		t.FailNow()
	}
	if !testbroker.ReturnsByDeadline(t, "closing the backend", b.Close) {
		t.FailNow()
	}
	noneLeft(t, "what TryReceive left asking to end", before)
}

// Guarantee: a Publish to a topic whose partitions the backend's metadata
// lacks (the topic was deleted and made again), while the cluster answers
// no metadata request, returns by its context's deadline (1s, far below
// Options.AdminTimeout, 30s here, and sarama's Net.ReadTimeout) with an
// error wrapping ErrMetadata and context.DeadlineExceeded, having produced
// nothing; what it left asking ends with the backend's Close, cut at its
// deadline: none of their goroutines is left.
func TestPublishReturnsByItsDeadlineWhenTheClusterStopsAnsweringMetadata(t *testing.T) {
	publishHung(t, "hung-meta-ctx", false)
}

// Guarantee: the same Publish with a context without deadline returns by
// Options.AdminTimeout (here 1s) with an error wrapping ErrMetadata and
// context.DeadlineExceeded.
func TestPublishReturnsByTheAdminTimeoutWhenTheClusterStopsAnsweringMetadata(t *testing.T) {
	publishHung(t, "hung-meta", true)
}

// publishHung declares topology name, has the backend's shared client
// forget its main topic's partitions (the topic deleted, seen gone by a
// metadata refresh, then made again), makes the cluster answer no
// metadata request and checks that Publish returns by
// testbroker.HungDeadline with an error wrapping ErrMetadata: by
// Options.AdminTimeout, set to it, when byAdmin, else by its context's
// deadline; then that the backend's Close returns by its deadline and
// leaves no goroutine.
func publishHung(t *testing.T, name string, byAdmin bool) {
	t.Helper()
	before := goleak.IgnoreCurrent()
	c := testbroker.Kafka(t)
	b := newBackend(t, c.ListenAddrs())
	q := declare(t, b, topology.New(name))
	kname := kafkaName(name)
	if err := c.DeleteTopic(kname); err != nil {
		t.Fatal(err)
	}
	if err := b.client.RefreshMetadata(kname); err == nil {
		t.Fatalf("refreshing the metadata of deleted topic %q succeeded", kname)
	}
	if !b.client.PartitionNotReadable(kname, 0) {
		t.Fatalf("the backend's metadata still has the partitions of deleted topic %q", kname)
	}
	if err := c.CreateTopic(kname, 1, nil); err != nil {
		t.Fatal(err)
	}
	if byAdmin {
		b.opts.AdminTimeout = testbroker.HungDeadline
	}
	testbroker.HangKafkaKey(t, c, kmsg.Metadata)
	if !testbroker.ReturnsByDeadline(t, "Publish", func(ctx context.Context) error {
		if byAdmin {
			ctx = t.Context()
		}
		err := q.Publish(ctx, topology.Letter[msg]{Value: msg{N: 1}})
		if err != nil && !errors.Is(err, ErrMetadata) {
			t.Errorf("Publish with the metadata requests unanswered = %v, want an error wrapping ErrMetadata", err)
		}
		return err
	}) {
		t.FailNow()
	}
	if p := c.PartitionInfo(kname, 0); p != nil && p.HighWatermark != 0 {
		t.Errorf("topic %q has %d records after a Publish that failed, want none", kname, p.HighWatermark)
	}
	if !testbroker.ReturnsByDeadline(t, "closing the backend", b.Close) {
		t.FailNow()
	}
	noneLeft(t, "what Publish left asking to end", before)
}
