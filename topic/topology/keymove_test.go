package topology_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// keyMoveRun is a sequenced source over a reader that tells of its
// shards (topology.ShardNotifier), whose handler fails the first attempt
// of each key's first message (1 of key A, 11 of key B; retried after an
// hour) and records what it handles.
type keyMoveRun struct {
	q   *notifyQueues[int]
	src *topology.Source[int]
	p   *pipeline.Pipeline[int, int]
	pub *topology.Publisher[int]

	mu      sync.Mutex
	handled []int
}

// Keys A and B of keyMoveRun, on shards of their own.
var (
	shardA = topology.ShardOf("A", topology.DefaultRoutingShards)
	shardB = topology.ShardOf("B", topology.DefaultRoutingShards)
)

func all(int) bool         { return true }
func none(int) bool        { return false }
func onlyA(shard int) bool { return shard == shardA }
func onlyB(shard int) bool { return shard == shardB }

// keyOf is key A for the values below 10, B for the others.
func keyOf(v int) string {
	if v < 10 {
		return "A"
	}
	return "B"
}

// isFirst reports whether v is its key's message 1.
func isFirst(v int) bool { return v%10 == 1 }

func (r *keyMoveRun) now() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.handled)
}

// startKeyMoveRun starts the run and publishes, for each of keys (A or
// B), its message 1 and 2 (11 and 12 for B): 1 goes out to the hold
// queue and 2 waits behind it. block, when not nil, holds the first
// attempt of each key's message 1 in the handler until closed.
func startKeyMoveRun(t *testing.T, block chan struct{}, keys ...string) *keyMoveRun {
	t.Helper()
	return startKeyMoveRunOn(t, &notifyQueues[int]{}, block, keys...)
}

// startKeyMoveRunOn is startKeyMoveRun over q, whose Queues it sets.
func startKeyMoveRunOn(t *testing.T, q *notifyQueues[int], block chan struct{}, keys ...string) *keyMoveRun {
	t.Helper()
	if shardA == shardB {
		t.Fatalf("keys A and B share shard %d", shardA)
	}
	_, q.Queues = declareMemory(t, build(t, topology.New("keymove").Sequenced(topology.Skip).Hold(time.Hour)))
	r := &keyMoveRun{q: q}
	r.src, r.p = startPipeline(t, r.q, func(ctx context.Context, m *message.Message[int]) (int, error) {
		r.mu.Lock()
		r.handled = append(r.handled, m.Data)
		r.mu.Unlock()
		if d, _ := topology.DeliveryOf(m); isFirst(m.Data) && d.Retries == 0 {
			if block != nil {
				select {
				case <-block:
				case <-ctx.Done():
					return 0, ctx.Err()
				}
			}
			return 0, topology.Retry(errors.New("not yet"))
		}
		return m.Data, nil
	})
	r.pub, _ = topology.NewPublisher(r.q, topology.PublisherOptions[int]{Key: keyOf})
	var want []int
	for _, k := range keys {
		base := 0
		if k == "B" {
			base = 10
		}
		r.publish(t, base+1, base+2)
		want = append(want, base+1)
	}
	synctest.Wait()
	if got := r.now(); !slices.Equal(got, want) {
		t.Fatalf("handled %v before the reader told anything, want %v (each 2 held back behind its 1)", got, want)
	}
	return r
}

func (r *keyMoveRun) publish(t *testing.T, vs ...int) {
	t.Helper()
	for _, v := range vs {
		if err := r.pub.Publish(t.Context(), v); err != nil {
			t.Fatal(err)
		}
	}
}

// tell has the run's reader tell change with in, and waits for the
// source to act on it.
func (r *keyMoveRun) tell(t *testing.T, change topology.ShardChange, in func(int) bool) {
	t.Helper()
	if !r.q.reader(t).tell(change, in) {
		t.Fatal("the running sequenced Source set no OnShards on its reader")
	}
	synctest.Wait()
}

func (r *keyMoveRun) expect(t *testing.T, when string, want ...int) {
	t.Helper()
	if got := r.now(); !slices.Equal(got, want) {
		t.Fatalf("handled %v %s, want %v (stats %+v)", got, when, want, r.src.Stats())
	}
}

// Guarantee: when the reader of a sequenced source starts on an
// assignment without a key's shard while the key's message is out in a
// hold queue, the source no longer waits for that message (it comes back
// to the shard's new owner): the key's letters it held back go back to
// the backend and, like the key's later letters once the shard comes
// back, are admitted as they arrive, not held back until the source
// stops. A key whose shard the assignment keeps still waits.
func TestAKeyWhoseShardTheReaderNoLongerHoldsNoLongerWaitsForItsMessageOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startKeyMoveRun(t, nil, "A", "B")
		r.tell(t, topology.ShardsReleased, onlyA)
		if got := r.q.takeReturned(); !slices.Equal(got, []int{2}) {
			t.Errorf("gave back %v as the reader let go of A's shard, want [2]: what it held back of it", got)
		}
		r.tell(t, topology.ShardsReleased, all)
		r.expect(t, "once the reader let go of both keys' shards (they may come back)", 1, 11)
		if got := r.q.takeReturned(); !slices.Equal(got, []int{12}) {
			t.Errorf("gave back %v as the reader let go of every shard, want [12] (2 went with A's shard)", got)
		}
		r.tell(t, topology.ShardsAssigned, onlyB)
		r.expect(t, "once the reader's assignment left A's shard out", 1, 11)
		r.tell(t, topology.ShardsAssigned, all)
		r.expect(t, "once A's shard came back", 1, 11, 2)
		r.publish(t, 3)
		synctest.Wait()
		r.expect(t, "once A's shard came back and 3 came", 1, 11, 2, 3)
		if st := r.src.Stats(); st.HeldBack != 1 {
			t.Errorf("stats %+v, want 12 held back behind 11", st)
		}
		time.Sleep(time.Hour) // fake time: the retries fall due and come back
		synctest.Wait()
		r.expect(t, "once the retries came back", 1, 11, 2, 3, 1, 11, 12)
	})
}

// Guarantee: a reader that lets go of a key's shard and gets it back at
// once (an eager rebalance gives a Kafka member its partitions back)
// keeps the key waiting for its message out: the letters given back wait
// behind it again, and the key's order holds.
func TestAKeyWhoseShardComesBackAtOnceStillWaitsForItsMessageOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startKeyMoveRun(t, nil, "A")
		r.tell(t, topology.ShardsReleased, all)
		r.tell(t, topology.ShardsAssigned, all)
		r.expect(t, "with message 1 out", 1)
		if st := r.src.Stats(); st.HeldBack != 1 {
			t.Errorf("stats %+v, want 2 held back again", st)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		r.expect(t, "once message 1 came back", 1, 1, 2)
	})
}

// Guarantee: a key whose message is in flight as the reader's new
// assignment leaves its shard out keeps its turn until that message is
// done; should the message then go out to a hold queue, which brings it
// back to the shard's new owner, the key's letters no longer wait for
// it, even once the shard comes back. Should the shard come back before
// the message goes out, they wait for it as before.
func TestAKeyInFlightAsItsShardMovesWaitsForItsMessageOutOnlyWhereItComesBack(t *testing.T) {
	for _, c := range []struct {
		name   string
		back   bool // the shard comes back before message 1 goes out, not after
		before []int
		after  []int // once the hold's hour has passed
	}{
		{"shard back after", false, []int{1, 2}, []int{1, 2, 1}},
		{"shard back before", true, []int{1}, []int{1, 1, 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				block := make(chan struct{})
				r := startKeyMoveRun(t, block, "A")
				r.tell(t, topology.ShardsReleased, onlyA)
				r.tell(t, topology.ShardsAssigned, onlyB)
				if c.back {
					r.tell(t, topology.ShardsAssigned, onlyA)
				}
				r.expect(t, "while message 1 is in flight", 1)
				close(block)
				synctest.Wait()
				if !c.back {
					r.tell(t, topology.ShardsAssigned, onlyA)
				}
				r.expect(t, "once message 1 went out", c.before...)
				time.Sleep(time.Hour)
				synctest.Wait()
				r.expect(t, "once message 1 came back", c.after...)
			})
		})
	}
}

// Guarantee: a sequenced source sets nil on its reader's OnShards once
// the Run that subscribed the reader has returned, and only a sequenced
// source sets it.
func TestSourceSetsItsReadersOnShardsWhileItsRunReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startKeyMoveRun(t, nil, "A")
		rd := r.q.reader(t)
		if err := r.p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if rd.tell(topology.ShardsAssigned, none) {
			t.Error("the reader's OnShards is still set once its Run has returned")
		}

		_, mq := declareMemory(t, build(t, topology.New("plain").Hold(time.Hour)))
		q := &notifyQueues[int]{Queues: mq}
		_, p := startPipeline(t, q, func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil })
		synctest.Wait()
		if q.reader(t).tell(topology.ShardsAssigned, none) {
			t.Error("a source of a topology that is not sequenced set OnShards")
		}
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// Guarantee: a key done with once its shard moved away (its message went
// out while the reader no longer held the shard) leaves nothing behind
// for the key whose state it frees: that key's retry out still holds its
// later letters back, and an assignment that keeps that key's shard
// keeps them waiting.
func TestAKeyDoneWithAfterItsShardMovedLeavesNothingToTheNextKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		block := make(chan struct{})
		r := startKeyMoveRun(t, block, "A")
		r.tell(t, topology.ShardsReleased, onlyA)
		r.tell(t, topology.ShardsAssigned, onlyB)
		close(block) // 1 goes out: A is done with
		synctest.Wait()
		r.tell(t, topology.ShardsAssigned, all) // 2, given back, comes again
		r.expect(t, "once key A was done with", 1, 2)
		r.publish(t, 11, 12)
		synctest.Wait()
		r.expect(t, "with B's message 11 out", 1, 2, 11)
		r.tell(t, topology.ShardsAssigned, onlyB)
		r.expect(t, "once an assignment kept B's shard", 1, 2, 11)
		if st := r.src.Stats(); st.HeldBack != 1 {
			t.Errorf("stats %+v, want 12 held back behind 11", st)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		// 1 comes back through the reader after it told its assignment:
		// handled, as the first of a key the source no longer knows.
		r.expect(t, "once the retries came back", 1, 2, 11, 1, 11, 12)
	})
}

// Guarantee: a sequenced source that waits at MaxHeldBack for room takes
// letters from its reader again as soon as what its reader tells (a part
// let go, an assignment leaving a key out) has it give back the letters
// it held back: it does not wait on for a key's message in flight.
func TestASourceAtMaxHeldBackTakesLettersAgainOnceItsReaderHasItGiveThemBack(t *testing.T) {
	for _, c := range []struct {
		name   string
		change topology.ShardChange
		in     func(int) bool
	}{
		{"released", topology.ShardsReleased, onlyA},
		{"assigned", topology.ShardsAssigned, onlyB},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, mq := declareMemory(t, build(t, topology.New("full").Sequenced(topology.Skip).Hold(time.Hour)))
				q := &notifyQueues[int]{Queues: mq, elsewhere: true}
				src, err := topology.NewSource(topology.SourceOptions[int]{Queues: q, MaxHeldBack: 1, Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Fatal(err)
				}
				block := make(chan struct{})
				startPipelineOf(t, "full", src, func(ctx context.Context, m *message.Message[int]) (int, error) {
					if m.Data == 1 {
						select {
						case <-block:
						case <-ctx.Done():
						}
					}
					return m.Data, nil
				})
				defer close(block)
				pub, _ := topology.NewPublisher(q, topology.PublisherOptions[int]{Key: keyOf})
				for _, v := range []int{1, 2, 11} {
					if err := pub.Publish(t.Context(), v); err != nil {
						t.Fatal(err)
					}
				}
				synctest.Wait()
				if st := src.Stats(); st.Received != 2 || st.HeldBack != 1 {
					t.Fatalf("stats %+v, want 1 in flight and 2 held back, at MaxHeldBack: 11 not taken", st)
				}
				if !q.reader(t).tell(c.change, c.in) {
					t.Fatal("the running sequenced Source set no OnShards on its reader")
				}
				synctest.Wait()
				if st := src.Stats(); st.Received != 3 || st.HeldBack != 0 {
					t.Errorf("stats %+v once 2 was given back, want 11 taken", st)
				}
			})
		})
	}
}

// letAGoThenAssign has the run's reader let go of key A's shard, then
// tell the assignment in, and checks that A's letter 2 held back was
// given back.
func (r *keyMoveRun) letAGoThenAssign(t *testing.T, in func(int) bool) {
	t.Helper()
	r.tell(t, topology.ShardsReleased, onlyA)
	r.tell(t, topology.ShardsAssigned, in)
	if got := r.q.takeReturned(); !slices.Equal(got, []int{2}) {
		t.Errorf("gave back %v as the reader let go of A's shard, want [2]", got)
	}
}

// onReceiving has the run's reader, as a Receive of r takes letter v,
// tell what tells does before it returns the letters: the run admits v
// only after the reader told it.
func (r *keyMoveRun) onReceiving(t *testing.T, v int, tells func(rd *notifyReader[int])) {
	t.Helper()
	rd := r.q.reader(t)
	var once sync.Once
	rd.onReceived(func(ls []topology.Letter[int]) {
		if slices.ContainsFunc(ls, func(l topology.Letter[int]) bool { return l.Value == v }) {
			once.Do(func() { tells(rd) })
		}
	})
}

// Guarantee: a letter that a sequenced source took from its reader just
// before the reader let go of the letter's shard, and admits after, goes
// back to the backend, counted off the reader, rather than wait behind
// its key's message out: the reader's release, which waits for every
// letter it handed out, does not wait for it. An assignment that gives
// the shard back (an eager rebalance hands a member its partitions back
// at once) has the letters of it admitted again, behind the message out,
// in the key's order.
func TestALetterTakenBeforeItsShardIsLetGoIsGivenBackNotHeldBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startKeyMoveRun(t, nil, "A")
		r.onReceiving(t, 3, func(rd *notifyReader[int]) { rd.tell(topology.ShardsReleased, all) })
		r.publish(t, 3)
		synctest.Wait()
		if got := r.q.takeReturned(); !slices.Equal(got, []int{2, 3}) {
			t.Errorf("gave back %v as the reader let go of A's shard while 3 was being taken, want [2 3]", got)
		}
		if st := r.src.Stats(); st.HeldBack != 0 {
			t.Errorf("stats %+v, want nothing held back of a shard let go of", st)
		}
		r.tell(t, topology.ShardsAssigned, all)
		if st := r.src.Stats(); st.HeldBack != 2 {
			t.Errorf("stats %+v once A's shard came back, want 2 and 3 held back behind 1", st)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		r.expect(t, "once message 1 came back", 1, 1, 2, 3)
	})
}

// Guarantee: a letter that a sequenced source took from its reader just
// before the reader's new assignment left the letter's shard out, and
// admits after, goes back to the backend rather than be handled at once
// as the first of a key the source no longer knows: it would go ahead of
// its key's message out, which comes back to the shard's new owner. So
// it is whether the reader let the shard go before the assignment or
// learns it only from the assignment.
func TestALetterTakenBeforeAnAssignmentLeavesItsShardOutIsGivenBackNotHandled(t *testing.T) {
	for _, c := range []struct {
		name     string
		released bool
	}{{"released first", true}, {"assigned alone", false}} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := startKeyMoveRun(t, nil, "A")
				r.onReceiving(t, 3, func(rd *notifyReader[int]) {
					if c.released {
						rd.tell(topology.ShardsReleased, onlyA)
					}
					rd.tell(topology.ShardsAssigned, onlyB)
				})
				r.publish(t, 3)
				synctest.Wait()
				r.expect(t, "once the reader's assignment left A's shard out while 3 was being taken", 1)
				if got := r.q.takeReturned(); !slices.Equal(got, []int{2, 3}) {
					t.Errorf("gave back %v, want [2 3]: the letters of A's shard, for its new owner", got)
				}
				if st := r.src.Stats(); st.HeldBack != 0 {
					t.Errorf("stats %+v, want nothing held back", st)
				}
			})
		})
	}
}

// Guarantee: a letter that a sequenced source's reader hands out after
// it told that it let go of the letter's shard, or that its assignment
// left the shard out, is handled: the reader hands it out of a part it
// holds (a Kafka partition holding letters of a shard that the
// partition count now routes to another partition), and given back it
// would come back only to be given back again, handled nowhere.
func TestALetterItsReaderHandsOutAfterTellingItsShardGoneIsHandled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startKeyMoveRun(t, nil, "A")
		r.letAGoThenAssign(t, onlyB)
		r.publish(t, 3)
		synctest.Wait()
		r.expect(t, "once the reader handed out 3 after its assignment left A's shard out", 1, 3)
		if got := r.q.takeReturned(); len(got) != 0 {
			t.Errorf("gave back %v, want nothing: 3 came after the reader told", got)
		}
	})
}

// Guarantee: the shards a reader lets go of one after the other add up
// until an assignment: a letter taken as the reader let go of its shard
// is given back even when the reader let go of another shard after.
func TestALetterTakenAsItsShardIsLetGoIsGivenBackWhateverIsLetGoAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startKeyMoveRun(t, nil, "A", "B")
		r.onReceiving(t, 3, func(rd *notifyReader[int]) {
			rd.tell(topology.ShardsReleased, onlyA)
			rd.tell(topology.ShardsReleased, onlyB)
		})
		r.publish(t, 3)
		synctest.Wait()
		got := r.q.takeReturned()
		slices.Sort(got)
		if !slices.Equal(got, []int{2, 3, 12}) {
			t.Errorf("gave back %v as the reader let go of A's shard, then B's, while 3 was being taken, want [2 3 12]", got)
		}
		if st := r.src.Stats(); st.HeldBack != 0 {
			t.Errorf("stats %+v, want nothing held back of the shards let go of", st)
		}
	})
}

// Guarantee: a sequenced source whose reader knows each letter's part
// (topology.PartTracker) gives back, as the reader lets a part go, the
// letters held back that the part handed out, whatever the shards the
// reader tells of: a letter of a part the reader keeps stays held back
// behind its key's message out even as its shard is let go (a partition
// holding letters of a shard a grown partition count routes elsewhere),
// and goes in its key's order once that message comes back, rather than
// be given back to a part that does not hand it out again; a letter of
// the part let go goes back even when its shard is not told.
func TestASequencedSourceGivesBackTheLettersOfThePartItsReaderLetsGo(t *testing.T) {
	for _, c := range []struct {
		name         string
		partLetGo    bool
		told         func(int) bool
		wantReturned []int
		wantHeldBack int
	}{
		{"part kept, shard let go", false, onlyA, nil, 1},
		{"part let go, shard not told", true, onlyB, []int{2}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var letGo atomic.Bool // the one part of the reader
				q := &notifyQueues[int]{elsewhere: true, letGo: func(any) bool { return letGo.Load() }}
				r := startKeyMoveRunOn(t, q, nil, "A")
				letGo.Store(c.partLetGo)
				r.tell(t, topology.ShardsReleased, c.told)
				if got := r.q.takeReturned(); !slices.Equal(got, c.wantReturned) {
					t.Errorf("gave back %v as the reader let the part go, want %v", got, c.wantReturned)
				}
				if st := r.src.Stats(); st.HeldBack != c.wantHeldBack {
					t.Errorf("stats %+v, want %d held back", st, c.wantHeldBack)
				}
				if !c.partLetGo {
					time.Sleep(time.Hour)
					synctest.Wait()
					r.expect(t, "once message 1 came back", 1, 1, 2)
				}
			})
		})
	}
}

// Guarantee: an assignment that gives back a shard the reader let go of
// ends its letting go: a letter of that shard taken later, as the reader
// lets another shard go, waits its turn behind its key's message out
// rather than be given back for a new owner the shard does not have.
func TestALetterOfAShardAssignedBackIsHeldBackAsTheReaderLetsAnotherGo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startKeyMoveRun(t, nil, "A")
		r.letAGoThenAssign(t, all)
		r.onReceiving(t, 3, func(rd *notifyReader[int]) { rd.tell(topology.ShardsReleased, onlyB) })
		r.publish(t, 3)
		synctest.Wait()
		if got := r.q.takeReturned(); len(got) != 0 {
			t.Errorf("gave back %v as the reader let go of B's shard while 3 was being taken, want nothing", got)
		}
		if st := r.src.Stats(); st.HeldBack != 2 {
			t.Errorf("stats %+v, want 2 and 3 held back behind 1", st)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		r.expect(t, "once message 1 came back", 1, 1, 2, 3)
	})
}
