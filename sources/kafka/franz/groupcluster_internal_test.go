package franz

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// groupCluster starts a one-broker kfake cluster with one partition of
// topic holding records records (values "0", "1", ...), closed at cleanup.
func groupCluster(t *testing.T, topic string, records int) *kfake.Cluster {
	t.Helper()
	return partitionsCluster(t, topic, 1, 0, records)
}

// partitionsCluster starts a one-broker kfake cluster with parts
// partitions of topic, partition part holding records records (values
// "0", "1", ...) and the others none, closed at cleanup.
func partitionsCluster(t *testing.T, topic string, parts, part int32, records int) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(parts, topic), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	values := make([]string, records)
	for i := range values {
		values[i] = strconv.Itoa(i)
	}
	produce(t, c, topic, part, values...)
	return c
}

// produce writes one record of each of values, in order, to partition part
// of topic on c.
func produce(t *testing.T, c *kfake.Cluster, topic string, part int32, values ...string) {
	t.Helper()
	pcl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	for _, v := range values {
		r := &kgo.Record{Topic: topic, Partition: part, Value: []byte(v)}
		if err := pcl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// fastGroup are client options for quick group operations on kfake: short
// sessions and heartbeats, a rebalance timeout above the tests'
// RevokeTimeout of 2s, short backoffs and fetch waits.
func fastGroup() []kgo.Opt {
	return []kgo.Opt{
		kgo.SessionTimeout(2 * time.Second),
		kgo.HeartbeatInterval(50 * time.Millisecond),
		kgo.RebalanceTimeout(4 * time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.FetchMaxWait(50 * time.Millisecond),
	}
}

// holdFirstCommit makes the first commit of any member wait, after it
// picked its offsets and before it is sent, until resume is called (at
// cleanup at the latest); stalled receives that member as it starts
// waiting.
func holdFirstCommit(t *testing.T) (stalled <-chan *member, resume func()) {
	var armed atomic.Bool
	armed.Store(true)
	ch, held := make(chan *member, 1), make(chan struct{})
	beforeCommitSend = func(m *member) {
		if armed.CompareAndSwap(true, false) {
			ch <- m
			<-held
		}
	}
	resume = sync.OnceFunc(func() { close(held) })
	t.Cleanup(func() {
		resume()
		beforeCommitSend = nil
	})
	return ch, resume
}

// answerNextHeartbeat answers the next heartbeat of group with code, once
// armed is called (and each time again after), then calls answered when
// it is not nil.
func answerNextHeartbeat(c *kfake.Cluster, group string, code int16, answered func()) (arm func()) {
	var armed atomic.Bool
	c.ControlKey(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.HeartbeatRequest)
		if r.Group != group || !armed.CompareAndSwap(true, false) {
			return nil, nil, false
		}
		if answered != nil {
			answered()
		}
		resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = code
		return resp, nil, true
	})
	return func() { armed.Store(true) }
}

// stopWithCommitHeld starts a pipeline over a source of group on c (with
// the rebalance strategy, commits on an hourly interval, so that the first
// commit is the final one of Close's release; log receives its lines when
// not nil; each of more changes its options after),
// waits until it has handled and marked for commit all of topic's
// records, and stops it on a goroutine of its own. It returns once the
// member's final commit waits in the hold holdFirstCommit set (stalled),
// with that member and the channel that receives Stop's error.
func stopWithCommitHeld(t *testing.T, c *kfake.Cluster, group, topic, rebalance string, records int64, log *slog.Logger,
	stalled <-chan *member, more ...func(*Options)) (*member, <-chan error) {
	t.Helper()
	src := groupSource(t, c, topic, group, func(o *Options) {
		o.Rebalance, o.CommitInterval, o.Logger = rebalance, time.Hour, log
		for _, set := range more {
			set(o)
		}
	})
	var handled atomic.Int32
	p, err := pipeline.New(pipeline.Options[[]byte, []byte]{
		Name:            group,
		ShutdownTimeout: 20 * time.Second,
		Producer:        producer.Options[[]byte]{Source: src},
		Processors: processor.Options[[]byte, []byte]{
			Handle: func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
				handled.Add(1)
				return m.Data, nil
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	marked := func() int64 {
		for _, ms := range src.Stats().Members {
			for _, ps := range ms.Partitions {
				return ps.Marked
			}
		}
		return -1
	}
	wait.For(t, "every record handled and marked for commit", func() bool { return marked() == records },
		func() string { return fmt.Sprintf("%d handled, marked %d", handled.Load(), marked()) })
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		stopped <- p.Stop(ctx)
	}()
	select {
	case m := <-stalled:
		return m, stopped
	case <-time.After(wait.Deadline):
		t.Fatal("the stopping member never committed")
		return nil, nil
	}
}

// refuseFirstCommits refuses the first n OffsetCommit requests of group
// on c with code on every partition; the others are answered as usual.
func refuseFirstCommits(c *kfake.Cluster, group string, code int16, n int64) *testbroker.Faults {
	var seen atomic.Int64
	f := testbroker.Inject(c, kmsg.OffsetCommit, code, func(req kmsg.Request) bool {
		return req.(*kmsg.OffsetCommitRequest).Group == group && seen.Add(1) <= n
	})
	f.Every(1)
	return f
}

// committedOffset is group's committed offset of partition 0 of topic on
// c, -1 when there is none.
func committedOffset(c *kfake.Cluster, group, topic string) int64 {
	if gi := c.GroupInfo(group); gi != nil {
		if oc, ok := gi.Commits[topic][0]; ok {
			return oc.Offset
		}
	}
	return -1
}

// groupSource returns a source of group on c's topic, read from the
// earliest offset, with a revoke waiting up to 2 s and fastGroup's client
// options, once set (when not nil) has changed those options.
func groupSource(t *testing.T, c *kfake.Cluster, topic, group string, set func(*Options)) *Source {
	t.Helper()
	o := Options{
		Brokers:       c.ListenAddrs(),
		GroupID:       group,
		Topics:        []string{topic},
		InitialOffset: OffsetEarliest,
		RevokeTimeout: 2 * time.Second,
		ClientOptions: fastGroup(),
	}
	if set != nil {
		set(&o)
	}
	src, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// ackCommittingSource is groupSource committing on acknowledgement.
func ackCommittingSource(t *testing.T, c *kfake.Cluster, topic, group string) *Source {
	t.Helper()
	return groupSource(t, c, topic, group, func(o *Options) { o.CommitMode = CommitOnAck })
}
