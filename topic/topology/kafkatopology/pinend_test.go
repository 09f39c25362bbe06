package kafkatopology

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: while the cluster leaves the requests for the log ends
// (ListOffsets) unanswered, PinEnd under a context without deadline
// returns by Options.AdminTimeout, with an error wrapping
// context.DeadlineExceeded, rather than waiting for the cluster.
func TestPinEndIsBoundedByTheAdminTimeoutWhileTheLogEndsGoUnanswered(t *testing.T) {
	c := testbroker.Kafka(t)
	b := newBackend(t, c.ListenAddrs(), func(o *Options[msg]) { o.AdminTimeout = testbroker.HungDeadline })
	q := declare(t, b, topology.New("pinhung").DLQ())
	r := subscribeDead(t, q)
	testbroker.HangKafkaKey(t, c, kmsg.ListOffsets)
	testbroker.ReturnsByDeadline(t, "PinEnd", func(context.Context) error {
		return r.(topology.EndPinner).PinEnd(context.Background())
	})
}

// Guarantee: a pinned dead-letter reader delivers only the letters the
// DLQ held when PinEnd was called: a letter dead-lettered after it to a
// partition added to the DLQ since is not delivered, even once the
// reader's session holds that partition, and TryReceive returns 0 once
// the letters before the pin are delivered.
func TestAPinnedDeadReaderReadsNothingOfAPartitionAddedAfterThePin(t *testing.T) {
	c := testbroker.Kafka(t)
	b := newBackend(t, c.ListenAddrs(), func(o *Options[msg]) {
		o.AdminTimeout = 5 * time.Second
		o.Config.Metadata.RefreshFrequency = 100 * time.Millisecond
	})
	q := declare(t, b, topology.New("pingrow").DLQ()).(*queues[msg])
	if err := q.DeadLetter(t.Context(), topology.Letter[msg]{Value: msg{N: 1}, Death: &topology.Death{Reason: topology.ReasonRejected}}); err != nil {
		t.Fatal(err)
	}
	r := subscribeDead(t, q).(*groupReader[msg])
	if err := r.PinEnd(t.Context()); err != nil {
		t.Fatalf("PinEnd: %v", err)
	}
	admin := testbroker.Admin(t, c.ListenAddrs())
	if err := admin.CreatePartitions(q.dlq, 2, nil, false); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the backend to learn of the added partition", func() bool {
		ps, err := b.client.Partitions(q.dlq)
		return err == nil && len(ps) == 2
	})
	l := topology.Letter[msg]{Value: msg{N: 2}, Death: &topology.Death{Reason: topology.ReasonRejected}}
	rec, err := q.record(t.Context(), q.dlq, &l, 0)
	if err != nil {
		t.Fatal(err)
	}
	rec.Partition = 1
	if err := b.send(rec); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the reader's session to hold the added partition", func() bool {
		return slices.Equal(claimed(r), []int32{0, 1})
	}, func() string { return fmt.Sprintf("claims: %v", claimed(r)) })
	var got []int
	buf := make([]topology.Letter[msg], 4)
	for {
		n, err := r.TryReceive(t.Context(), buf)
		if err != nil {
			t.Fatalf("TryReceive with %v received: %v", got, err)
		}
		if n == 0 {
			break
		}
		for i := range buf[:n] {
			got = append(got, buf[i].Value.N)
			if err := r.Settle(t.Context(), &buf[i]); err != nil {
				t.Errorf("Settle letter %d: %v", buf[i].Value.N, err)
			}
		}
	}
	if !slices.Equal(got, []int{1}) {
		t.Fatalf("the pinned reader delivered letters %v, want [1]: letter 2 went to a partition added after the pin", got)
	}
}
