package kafka_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/producer"
)

// Guarantee: a producer stage stopped while the group's coordinator holds
// one of the requests of its member's join (the coordinator lookup, the
// join, the sync, the lookup of its claims' committed offsets) returns at
// once: the member joins on a goroutine of its own, so the stage's Run
// does not wait for the held request. The source's Close, which the
// pipeline bounds by its ShutdownTimeout, cuts the member's connections
// when that ends, which fails the held request, and returns within the
// leave grace (and a margin for a stalled machine), well before Stop's
// own context ends; Stop returns nil, or, on a machine too stalled for
// the pipeline's CancelGrace past that bound, reports the source's Close
// alone, never the producer stage. A member stopped before its join was
// answered never was in the group. (kfake answers no other request while
// it holds one, so the leave of a member that joined cannot be seen
// here.)
func TestAStageStoppedWhileItsMemberJoinsReturnsAtOnce(t *testing.T) {
	for _, key := range []kmsg.Key{kmsg.FindCoordinator, kmsg.JoinGroup, kmsg.SyncGroup, kmsg.OffsetFetch} {
		t.Run(key.Name(), func(t *testing.T) {
			group := "g-stop-held-" + key.Name()
			c := newCluster(t, 1)
			held := testbroker.HoldFirst(t, c, key)
			opts := sourceOptions(c, group)
			cfg := *opts.Config
			cfg.Metadata.Retry.Backoff = 10 * time.Second
			opts.Config = &cfg
			src := timedRun{
				testSource: timedClose{testSource: newSource(t, opts), past: make(chan time.Duration, 1)},
				returned:   make(chan time.Time, 1),
			}
			po := pipelineOpts("stop-held-"+key.Name(), src, 1, newLedger(), nil)
			p := startPipeline(t, po)
			select {
			case <-held:
			case <-time.After(30 * time.Second):
				stopPipeline(t, p)
				t.Fatalf("the member never sent a %s request", key.Name())
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			start := time.Now()
			err := p.Stop(ctx)
			took := time.Since(start)
			t.Logf("Stop = %v after %v", err, took.Round(time.Millisecond))
			select {
			case at := <-src.returned:
				if ran := at.Sub(start); ran > testbroker.CloseMargin {
					t.Fatalf("the stage's Run returned %v after the stop began, while the coordinator held the %s request; want at most %v",
						ran.Round(time.Millisecond), key.Name(), testbroker.CloseMargin)
				}
			default:
				t.Fatalf("the stage's Run had not returned when Stop did (%v), while the coordinator held the %s request", err, key.Name())
			}
			if err != nil && !onlySourceClose(err) {
				t.Fatalf("Stop while the coordinator held the %s request = %v (after %v), want nil",
					key.Name(), err, took.Round(time.Millisecond))
			}
			select {
			case past := <-src.testSource.(timedClose).past:
				if limit := claimLeaveGrace + testbroker.CloseMargin; past > limit {
					t.Fatalf("the source's Close returned %v past its deadline while the coordinator held the %s request; want at most %v",
						past.Round(time.Millisecond), key.Name(), limit)
				}
			case <-time.After(time.Minute):
				t.Fatalf("the source's Close did not return within a minute of Stop's, while the coordinator held the %s request", key.Name())
			}
			if key != kmsg.FindCoordinator && key != kmsg.JoinGroup {
				return
			}
			if gi := c.GroupInfo(group); gi != nil && len(gi.Members) > 0 {
				t.Fatalf("members %+v are in the group after the pipeline stopped before its join was answered; want none", gi.Members)
			}
		})
	}
}

// onlySourceClose reports whether err is a *pipeline.ShutdownTimeoutError
// that names no goroutine but the source's Close: every stage returned.
func onlySourceClose(err error) bool {
	var ste *pipeline.ShutdownTimeoutError
	if !errors.As(err, &ste) {
		return false
	}
	for _, s := range ste.Running {
		if s.Kind != pipeline.KindSourceClose {
			return false
		}
	}
	return true
}

// timedRun is a source whose Run sends when it returned on returned.
type timedRun struct {
	testSource
	returned chan time.Time
}

func (s timedRun) Run(ctx context.Context, st *producer.Stage[[]byte]) error {
	err := s.testSource.Run(ctx, st)
	select {
	case s.returned <- time.Now():
	default:
	}
	return err
}
