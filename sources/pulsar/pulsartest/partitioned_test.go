package pulsartest

import (
	"errors"
	"testing"
)

// partitionedTopic creates the partitioned topic name with n partitions
// on b and returns its full name.
func partitionedTopic(t *testing.T, b *Broker, name string, n int) string {
	t.Helper()
	topic := FullTopicName(name)
	if err := b.CreateTopic(topic, n); err != nil {
		t.Fatal(err)
	}
	return topic
}

// Backlog of a partitioned topic's base name sums the partitions that have
// the subscription; a partition without it adds nothing, and a
// subscription no partition has is -1.
func TestPartitionedBacklogSumsThePartitionsWithTheSubscription(t *testing.T) {
	b := startBroker(t)
	topic := partitionedTopic(t, b, "backlog-sum", 3)
	r := connectedRaw(t, b)
	rawSubscribe(r, PartitionTopic(topic, 0), "s", subShared, 1, 1)
	rawSubscribe(r, PartitionTopic(topic, 1), "s", subShared, 2, 2)
	for i, n := range []int{2, 3, 4} {
		publishN(t, b, PartitionTopic(topic, i), n)
	}
	if got := b.Backlog(topic, "s"); got != 5 {
		t.Errorf("Backlog(base, s) = %d, want 5 (2 on partition 0 + 3 on partition 1)", got)
	}
	if got := b.Backlog(topic, "none"); got != -1 {
		t.Errorf("Backlog(base, none) = %d, want -1", got)
	}
}

// RefuseSubscribe on a partitioned topic's base name refuses the
// subscription on every partition, and nil lets them through again.
func TestRefuseSubscribeOnTheBaseNameRefusesEveryPartition(t *testing.T) {
	b := startBroker(t)
	topic := partitionedTopic(t, b, "refuse-partitions", 2)
	b.RefuseSubscribe(topic, "s", &ServerError{Code: ServiceNotReady, Message: "refused"})
	r := connectedRaw(t, b)
	for i := range 2 {
		r.send(cmdSubscribe, func(o []byte) []byte {
			o = appendStringField(o, 1, PartitionTopic(topic, i))
			o = appendStringField(o, 2, "s")
			o = appendVarintField(o, 3, subShared)
			o = appendVarintField(o, 4, uint64(i+1))
			return appendVarintField(o, 5, uint64(i+1))
		}, nil)
		if f, _ := r.expect(cmdError); ServerErrorCode(f.u[2]) != ServiceNotReady {
			t.Fatalf("subscribe to partition %d: error %+v, want ServiceNotReady", i, f)
		}
	}
	b.RefuseSubscribe(topic, "s", nil)
	rawSubscribe(r, PartitionTopic(topic, 1), "s", subShared, 3, 3)
}

// Unload on a closed broker reports ErrClosed.
func TestUnloadAfterCloseIsErrClosed(t *testing.T) {
	b := startBroker(t)
	if err := b.CreateTopic("unload-closed", 0); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Unload("unload-closed"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Unload after Close = %v, want ErrClosed", err)
	}
}

// StallDispatch on a partitioned topic's base name stalls every partition
// already there: nothing is pushed until it is resumed.
func TestStallDispatchOnTheBaseNameStallsEveryPartition(t *testing.T) {
	b := startBroker(t)
	topic := partitionedTopic(t, b, "stall-partitions", 2)
	r := connectedRaw(t, b)
	rawSubscribe(r, PartitionTopic(topic, 1), "s", subShared, 1, 1)
	b.StallDispatch(topic, true)
	rawFlow(r, 1, 10)
	publishN(t, b, PartitionTopic(topic, 1), 1)
	r.quiet() // and no MESSAGE before the PONG
	b.StallDispatch(topic, false)
	r.expect(cmdMessage)
}
