package franz

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupCluster starts a one-broker kfake cluster with one partition of
// topic holding records records (values "0", "1", ...), closed at cleanup.
func groupCluster(t *testing.T, topic string, records int) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	pcl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	for i := range records {
		if err := pcl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	return c
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
