package kafka_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/telemetry"
)

// assignLog records one source's PartitionAssigned and PartitionRevoked
// events.
type assignLog struct {
	mu       sync.Mutex
	assigned []telemetry.Assignment
	revoked  []telemetry.Assignment
	errs     []string
}

func (l *assignLog) hooks() *telemetry.Hooks {
	return &telemetry.Hooks{
		PartitionAssigned: func(_ context.Context, e telemetry.Assignment) {
			l.mu.Lock()
			defer l.mu.Unlock()
			if slices.Contains(l.assigned, e) {
				l.errs = append(l.errs, fmt.Sprintf("assigned twice: %+v", e))
			}
			l.assigned = append(l.assigned, e)
		},
		PartitionRevoked: func(ctx context.Context, e telemetry.Assignment) {
			l.mu.Lock()
			defer l.mu.Unlock()
			if ctx.Err() != nil {
				l.errs = append(l.errs, fmt.Sprintf("revoked with a context already done: %+v", e))
			}
			if !slices.Contains(l.assigned, e) || slices.Contains(l.revoked, e) {
				l.errs = append(l.errs, fmt.Sprintf("revoked without being assigned, or twice: %+v", e))
			}
			l.revoked = append(l.revoked, e)
		},
	}
}

// held returns the partitions assigned and not yet revoked.
func (l *assignLog) held() map[int32]telemetry.Assignment {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := map[int32]telemetry.Assignment{}
	for _, a := range l.assigned {
		if !slices.Contains(l.revoked, a) {
			h[a.Partition] = a
		}
	}
	return h
}

func (l *assignLog) revokedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.revoked)
}

// Guarantee: a Kafka source calls PartitionAssigned for each partition its
// member claims and PartitionRevoked for each it lets go, with the group,
// member and generation: a second member joining revokes partitions of
// the first and assigns the group's partitions between the two, and
// stopping the pipelines revokes every partition still held, each exactly
// once.
func TestTelemetryAssignedAndRevokedOnRebalance(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		for _, strategy := range []string{kafka.RebalanceRange, kafka.RebalanceCooperativeSticky} {
			t.Run(strategy, func(t *testing.T) {
				const parts = 4
				group := "g-telemetry-" + strategy
				c := newCluster(t, parts)
				produce(t, c, parts, 0, 40)
				l := newLedger()
				var la, lb assignLog
				optsA, optsB := sourceOptions(c, group), sourceOptions(c, group)
				optsA.Rebalance, optsB.Rebalance = strategy, strategy
				optsA.Telemetry, optsB.Telemetry = la.hooks(), lb.hooks()

				a := startPipeline(t, pipelineOpts("a", cl.new(t, optsA), 1, l, nil))
				wait.Within(t, 20*time.Second, "every partition assigned to the first member", func() bool { return len(la.held()) == parts })
				b := startPipeline(t, pipelineOpts("b", cl.new(t, optsB), 1, l, nil))
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				if _, err := c.WaitGroupInfo(ctx, group, func(gi *kfake.GroupInfo) bool {
					return gi != nil && len(gi.Members) == 2 && gi.Members[0].NumAssigned() > 0 && gi.Members[1].NumAssigned() > 0
				}); err != nil {
					t.Fatalf("the group did not settle on 2 members: %v", err)
				}
				wait.Within(t, 20*time.Second, "the partitions split between the members", func() bool {
					ha, hb := la.held(), lb.held()
					all := maps.Clone(ha)
					maps.Copy(all, hb)
					return len(ha) > 0 && len(hb) > 0 && len(ha)+len(hb) == parts && len(all) == parts
				})
				if la.revokedCount() == 0 {
					t.Error("the second member joined, yet the first saw no partition revoked")
				}
				for name, h := range map[string]map[int32]telemetry.Assignment{"a": la.held(), "b": lb.held()} {
					for _, e := range h {
						if e.Group != group || e.Member == "" || e.Generation <= 0 || e.Topic != testTopic {
							t.Errorf("member %s: event %+v, want group %q, a member id, a generation and topic %q", name, e, group, testTopic)
						}
					}
				}
				ids := map[string][]string{}
				for name, h := range map[string]map[int32]telemetry.Assignment{"a": la.held(), "b": lb.held()} {
					for _, e := range h {
						ids[name] = append(ids[name], e.Member)
					}
					ids[name] = slices.Compact(slices.Sorted(slices.Values(ids[name])))
				}
				if len(ids["a"]) != 1 || len(ids["b"]) != 1 || ids["a"][0] == ids["b"][0] {
					t.Errorf("member ids of the partitions held: a %q, b %q; want one each, different", ids["a"], ids["b"])
				}

				stopPipeline(t, a)
				stopPipeline(t, b)
				for name, lg := range map[string]*assignLog{"a": &la, "b": &lb} {
					if h := lg.held(); len(h) != 0 {
						t.Errorf("member %s stopped, still holding %v", name, slices.Sorted(maps.Keys(h)))
					}
					lg.mu.Lock()
					for _, e := range lg.errs {
						t.Errorf("member %s: %s", name, e)
					}
					lg.mu.Unlock()
				}
			})
		}
	})
}
