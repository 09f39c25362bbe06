package kafka_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/producer/sourcetest"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// Both Kafka sources (sarama and franz-go) pass the source conformance suite on a kfake cluster:
// two partitions (two feeds per member), one consumer group, outcomes read
// back as the group's committed offsets. A failure is the group
// coordinator ending the session and refusing the member's next join as
// unauthorized (Run returns ErrDenied). An outage is the cluster dropping
// the connection of every request it receives until it is restored.
func TestConformance(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		conformance(t, cl)
	})
}

func conformance(t *testing.T, cl client) {
	const parts = 2
	sourcetest.Run(t, sourcetest.Harness[[]byte]{
		Feeds: parts,
		Start: func(t testing.TB, n int) sourcetest.Fixture[[]byte] {
			const group = "g-conformance"
			c := newCluster(t, parts)
			f := failGroup(c, group)
			return sourcetest.Fixture[[]byte]{
				NewSource: func() (producer.Source[[]byte], error) {
					return cl.new(t, sourceOptions(c, group)), nil
				},
				Publish: func(context.Context) ([]string, error) {
					produce(t, c, parts, 0, n)
					keys := make([]string, n)
					for i := range keys {
						// produce puts record i on partition i%parts.
						keys[i] = recordKey(int32(i%parts), int64(i/parts))
					}
					return keys, nil
				},
				Key: func(m *message.Message[[]byte]) string {
					md, ok := message.MetadataAs[*kafka.Metadata](m)
					if !ok {
						return "no kafka metadata"
					}
					return recordKey(md.Partition, md.Offset)
				},
				Settled: func(context.Context) (int, error) {
					n := 0
					for _, off := range committed(c, group) {
						n += int(off)
					}
					return n, nil
				},
				// No Fetched: kfake shows the offsets fetches ask for, not
				// the records it answers with, so it cannot tell how far
				// the members read ahead.
				Fail:   f.fail,
				Outage: outage(c),
			}
		},
	})
}

// groupWatch injects a kfake group's failures.
type groupWatch struct {
	mu      sync.Mutex
	endNext bool   // end the next session (a heartbeat answers a rebalance)
	refused string // the member whose session was ended: its joins are refused
}

func failGroup(c *kfake.Cluster, group string) *groupWatch {
	w := &groupWatch{}
	c.ControlKey(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.HeartbeatRequest)
		w.mu.Lock()
		defer w.mu.Unlock()
		if r.Group != group || !w.endNext {
			return nil, nil, false
		}
		w.endNext, w.refused = false, r.MemberID
		resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.RebalanceInProgress.Code
		return resp, nil, true
	})
	c.ControlKey(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.JoinGroupRequest)
		w.mu.Lock()
		defer w.mu.Unlock()
		if r.Group != group || r.MemberID == "" || r.MemberID != w.refused {
			return nil, nil, false
		}
		resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil, true
	})
	return w
}

// fail ends the session of the next member to send a heartbeat and refuses
// every join of that member from then on: its Run fails at the refused
// join, and the run the stage starts next joins as a new member.
func (w *groupWatch) fail(context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.endNext = true
	return nil
}

// outage makes c drop the connection of every request it receives, as a
// cluster out of reach does, until the restore it returns is called.
func outage(c *kfake.Cluster) func(context.Context) (func(context.Context) error, error) {
	return func(context.Context) (func(context.Context) error, error) {
		f := testbroker.Inject(c, kmsg.Key(-1), 0, nil)
		f.Every(1)
		return func(context.Context) error {
			f.Every(0)
			return nil
		}, nil
	}
}

func recordKey(p int32, off int64) string { return fmt.Sprintf("%d@%d", p, off) }
