package source_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/source"
)

// reachOf returns the topic.ReachObserver the source gave the i-th
// subscribe of b (0 is the first), failing the test when it gave none.
func (b *heldBackend) reachOf(t *testing.T, i int) topic.ReachObserver {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if i >= len(b.opts) || b.opts[i].Reach == nil {
		t.Fatalf("subscribe %d of %d made without a Reach", i, len(b.opts))
	}
	return b.opts[i].Reach
}

// wantStates fails the test unless every stage of p is in state, with
// LastError err when err is not nil.
func wantStates(t *testing.T, p *pipeline.Pipeline[int, int], state producer.State, err error, when string) {
	t.Helper()
	for i, st := range p.SourceStatus() {
		if st.State != state || (err != nil && !errors.Is(st.LastError, err)) {
			t.Fatalf("%s: stage %d %+v, want %s (error %v)", when, i, st, state, err)
		}
	}
}

// reachRig starts, inside a synctest bubble, a pipeline of two producer
// stages sharing one broadcast subscription (on_lag disconnect) of a
// heldBackend; before is called once the source has subscribed and
// before the pipeline starts.
func reachRig(t *testing.T, before func(b *heldBackend)) (*heldBackend, *pipeline.Pipeline[int, int]) {
	t.Helper()
	return reachRigOf(t, topic.Options{Mode: topic.BroadcastOnly,
		Broadcast: topic.BroadcastPolicy{OnLag: topic.Disconnect}}, topic.Broadcast(), before)
}

// reachRigOf is reachRig on a topic made with opts, subscribed in mode:
// on a balanced topic each of the two stages has a subscription of its
// own, stage 0 the source's first (New's), stage 1 the second.
func reachRigOf(t *testing.T, opts topic.Options, mode topic.SubscriptionMode, before func(b *heldBackend)) (*heldBackend, *pipeline.Pipeline[int, int]) {
	t.Helper()
	b, h := heldTopic(t, opts)
	src, err := source.New(source.Options[int]{Topic: h, Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	before(b)
	p := run(t, pipeline.Options[int, int]{
		Name:     "reach",
		Producer: producer.Options[int]{Source: src, Concurrency: 2},
		Processors: processor.Options[int, int]{Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			return m.Data, nil
		}},
	})
	t.Cleanup(b.releaseAll)
	synctest.Wait()
	return b, p
}

// Guarantee: every stage receiving through a subscription whose backend
// reports that it cannot read from its broker is degraded, with the
// backend's error, and runs again once the backend reports that it
// reads; a subscription that replaces it (the topic disconnected the
// lagging one) starts from its own state, and the replaced one's reports
// no longer reach the stages.
func TestStagesAreDegradedWhileTheirSubscriptionCannotRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, p := reachRig(t, func(*heldBackend) {})
		wantStates(t, p, producer.StateRunning, nil, "before any report")
		first := b.reachOf(t, 0)
		away := errors.New("broker away")
		first.Degrade(away)
		wantStates(t, p, producer.StateDegraded, away, "after Degrade")
		first.Recovered()
		wantStates(t, p, producer.StateRunning, nil, "after Recovered")

		first.Degrade(away)
		b.sub(t, 0).disconnect()
		synctest.Wait()
		wantStates(t, p, producer.StateRunning, nil, "once a new subscription replaced the degraded one")
		first.Degrade(away)
		wantStates(t, p, producer.StateRunning, nil, "after a Degrade of the replaced subscription")
		again := errors.New("broker away again")
		b.reachOf(t, 1).Degrade(again)
		wantStates(t, p, producer.StateDegraded, again, "after a Degrade of the new subscription")
	})
}

// Guarantee: a stage whose Run begins while the subscription it
// receives through cannot read is degraded from the start, until the
// backend reports that the subscription reads.
func TestAStageStartingOnASubscriptionThatCannotReadIsDegraded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		away := errors.New("broker away")
		b, p := reachRig(t, func(b *heldBackend) { b.reachOf(t, 0).Degrade(away) })
		wantStates(t, p, producer.StateDegraded, away, "after the start")
		b.reachOf(t, 0).Recovered()
		wantStates(t, p, producer.StateRunning, nil, "after Recovered")
	})
}

// Guarantee: on a balanced topic, where each stage receives through a
// subscription of its own, a backend's report about one stage's
// subscription degrades that stage alone, and its Recovered brings that
// stage back; the other stage stays running throughout.
func TestABalancedMembersReportReachesOnlyItsOwnStage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, p := reachRigOf(t, topic.Options{}, topic.Balanced("g"), func(*heldBackend) {})
		away := errors.New("broker away")
		for _, member := range []int{1, 0} {
			other := 1 - member
			b.reachOf(t, member).Degrade(away)
			st := p.SourceStatus()
			if st[member].State != producer.StateDegraded || !errors.Is(st[member].LastError, away) || st[other].State != producer.StateRunning {
				t.Fatalf("after member %d's Degrade: stages %+v, want %d degraded and %d running", member, st, member, other)
			}
			b.reachOf(t, member).Recovered()
			wantStates(t, p, producer.StateRunning, nil, "after Recovered")
		}
	})
}

// Guarantee: a backend's Degrade without an error degrades the stages
// all the same, with producer.ErrUnreachable as their LastError.
func TestADegradeWithoutAnErrorDegradesWithErrUnreachable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, p := reachRig(t, func(*heldBackend) {})
		b.reachOf(t, 0).Degrade(nil)
		wantStates(t, p, producer.StateDegraded, producer.ErrUnreachable, "after Degrade(nil)")
	})
}
