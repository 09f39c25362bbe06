package franz

import (
	"context"
	"fmt"
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
	"github.com/boulevard-go/boulevard/sources/kafka/internal/claim"
)

// Guarantee: a member whose Close runs out of time while the group's
// coordinator holds one of its requests (the coordinator lookup, the
// join, the sync, the lookup of its committed offsets, a heartbeat, a
// commit, the leave) returns within its deadline and the leave grace:
// Close's deadline ends the client's context, which gives up the held
// request and franz-go's leave, and the member's own leave past the
// deadline waits the grace at most. franz-go's retry backoff is set to
// ten seconds here, so that a retry sleeping past the deadline would show.
func TestACloseWhileTheCoordinatorHoldsARequestReturnsByItsDeadline(t *testing.T) {
	for _, key := range []kmsg.Key{kmsg.FindCoordinator, kmsg.JoinGroup, kmsg.SyncGroup, kmsg.OffsetFetch,
		kmsg.Heartbeat, kmsg.OffsetCommit, kmsg.LeaveGroup} {
		t.Run(key.Name(), func(t *testing.T) {
			const topic = "events"
			group := "g-held-" + key.Name()
			c := groupCluster(t, topic, 3)
			held := testbroker.HoldFirst(t, c, key)
			member := groupSource(t, c, topic, group, func(o *Options) {
				o.CommitInterval = 50 * time.Millisecond
				o.ClientOptions = append(o.ClientOptions, kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Second }))
			})
			src := testbroker.ClosingByDeadline[[]byte](member)
			p := runPipeline(t, "held-"+key.Name(), src, func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) { return m.Data, nil })
			claimed := func() bool {
				ms := member.Stats().Members
				return len(ms) == 1 && len(ms[0].Partitions) == 1
			}
			if !testbroker.AwaitHeld(t, key, held, claimed, func() string { return fmt.Sprintf("stats %+v", member.Stats()) }) {
				t.Fatalf("the member never sent a %s request", key.Name())
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := p.Stop(ctx); err != nil {
				t.Errorf("stop: %v", err)
			}
			took := <-src.Took
			select {
			case <-held:
			case <-time.After(wait.Deadline):
				// The cut may end Close before the cluster reads a
				// request the member wrote just before it.
				t.Fatalf("the member never sent a %s request (none reached the cluster within %v)", key.Name(), wait.Deadline)
			}
			t.Logf("Close took %v with a deadline of %v", took.Round(time.Millisecond), testbroker.CloseDeadline)
			if limit := testbroker.CloseDeadline + claim.LeaveGrace + testbroker.CloseMargin; took > limit {
				t.Fatalf("Close took %v with a deadline of %v while the coordinator held the %s request; want at most %v",
					took.Round(time.Millisecond), testbroker.CloseDeadline, key.Name(), limit)
			}
		})
	}
}

// Guarantee: a producer stage stopped while its member still starts
// returns at once, even when the group's coordinator holds the sync its
// client sent meanwhile: here the member's check of its topics goes out
// once the SyncGroup is held, so it waits until the stage stops, and the
// member closes while the sync is in flight. franz-go's own leave would
// wait for that sync; the member gives it up and leaves on its commit
// client within claim.LeaveGrace, so the pipeline's stop ends well within
// its ShutdownTimeout, with nothing left running.
func TestAStageStoppedWhileItsMemberStartsReturnsWhileTheCoordinatorHoldsItsSync(t *testing.T) {
	const topic, group = "events", "g-held-start-sync"
	c := groupCluster(t, topic, 3)
	held := testbroker.HoldFirst(t, c, kmsg.SyncGroup)
	beforeTopicCheck = func(context.Context) {
		select {
		case <-held:
		case <-time.After(wait.Deadline):
		}
	}
	t.Cleanup(func() { beforeTopicCheck = nil })
	p := startingPipeline(t, "held-start-sync", groupSource(t, c, topic, group, nil))
	select {
	case <-held:
	case <-time.After(wait.Deadline):
		t.Fatal("the member never sent a SyncGroup request")
	}
	if took, err := timedStop(p); err != nil {
		t.Fatalf("stop while the member started and the coordinator held its SyncGroup = %v (after %v), want nil: the stage's Run did not return",
			err, took.Round(time.Millisecond))
	}
}

// Guarantee: a producer stage stopped while its member still starts, once
// its client has joined the group, leaves the group before its Run
// returns: the group does not keep it until its session times out (30 s
// here), to give it partitions nobody reads. Here the member's check of
// its topics waits until the stage stops, once the member holds its
// partition.
func TestAStageStoppedWhileItsMemberStartsLeavesTheGroup(t *testing.T) {
	const topic, group = "events", "g-start-stopped"
	c := groupCluster(t, topic, 3)
	joined := make(chan struct{})
	beforeTopicCheck = func(runCtx context.Context) {
		ctx, cancel := context.WithTimeout(runCtx, wait.Deadline)
		defer cancel()
		if _, err := c.WaitGroupInfo(ctx, group, func(gi *kfake.GroupInfo) bool {
			return gi != nil && len(gi.Members) == 1 && gi.NumAssigned() == 1
		}); err == nil {
			close(joined)
		}
		<-runCtx.Done()
	}
	t.Cleanup(func() { beforeTopicCheck = nil })
	src := groupSource(t, c, topic, group, func(o *Options) {
		o.ClientOptions = append(o.ClientOptions, kgo.SessionTimeout(30*time.Second))
	})
	p := startingPipeline(t, "start-stopped", src)
	select {
	case <-joined:
	case <-time.After(wait.Deadline):
		t.Fatal("the member never joined the group")
	}
	if took, err := timedStop(p); err != nil {
		t.Fatalf("stop while the member started = %v (after %v), want nil", err, took.Round(time.Millisecond))
	}
	if gi := c.GroupInfo(group); gi != nil && len(gi.Members) > 0 {
		t.Fatalf("members %+v are still in the group after the pipeline stopped; want none: the member whose start was stopped did not leave", gi.Members)
	}
}

// startingPipeline starts a pipeline named name reading src, with a
// ShutdownTimeout of claim.LeaveGrace and testbroker.CloseMargin, room for
// a machine that stalls the test process: a stage whose Run returns at
// once, leaving within the grace, is far within it, and one whose member
// waits for franz-go's leave (up to its request timeouts, 35 s) is not.
func startingPipeline(t *testing.T, name string, src *Source) *pipeline.Pipeline[[]byte, []byte] {
	t.Helper()
	return startPipeline(t, pipeline.Options[[]byte, []byte]{
		Name:            name,
		ShutdownTimeout: claim.LeaveGrace + testbroker.CloseMargin,
		Producer:        producer.Options[[]byte]{Source: src},
		Processors: processor.Options[[]byte, []byte]{Handle: func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
			return m.Data, nil
		}},
	})
}

// timedStop stops p, with a minute to do it, and returns how long Stop
// took and its error.
func timedStop(p *pipeline.Pipeline[[]byte, []byte]) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	err := p.Stop(ctx)
	return time.Since(start), err
}
