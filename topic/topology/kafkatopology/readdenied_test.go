package kafkatopology

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// reachLog records what a reader reports to its observer.
type reachLog struct {
	mu   sync.Mutex
	errs []error // nil: a Recovered
}

func (o *reachLog) Degrade(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.errs = append(o.errs, err)
}

func (o *reachLog) Recovered() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.errs = append(o.errs, nil)
}

// last returns the last report (nil: a Recovered) and whether there was any.
func (o *reachLog) last() (error, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.errs) == 0 {
		return nil, false
	}
	return o.errs[len(o.errs)-1], true
}

func (o *reachLog) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return fmt.Sprintf("%q", o.errs)
}

// partitionOf returns the figures of partition 0 of kname in b's Stats.
func partitionOf(b *Backend[msg], kname string) (PartitionStats, bool) {
	for _, ps := range b.Stats().Partitions {
		if ps.Topic == kname && ps.Partition == 0 {
			return ps, true
		}
	}
	return PartitionStats{}, false
}

// Guarantee: a reader (a group reader of the main topic, the DLQ reader,
// a broadcast reader) whose user an ACL change denies READ on its topic
// while its session stays up reports itself unable to read at its first
// refused fetch, with a reason wrapping sarama.ErrTopicAuthorizationFailed
// and naming the topic, and its partition figures in Stats say its
// fetches fail (FetchErr, the same); once READ is granted back it
// delivers the letter written meanwhile, reports that it reads again, and
// FetchErr is cleared as that letter is fetched.
func TestAReaderDeniedReadReportsItselfUnreachedAndItsFetchesFailingUntilGrantedBack(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tb     *topology.Builder
		topic  func(*queues[msg]) string
		reader func(*testing.T, topology.Queues[msg]) topology.Reader[msg]
		write  func(*testing.T, topology.Queues[msg], int)
	}{
		{"main topic", topology.New("acl-reach").DLQ(), func(q *queues[msg]) string { return q.main }, subscribe,
			func(t *testing.T, q topology.Queues[msg], n int) {
				if err := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: n}}); err != nil {
					t.Fatal(err)
				}
			}},
		{"DLQ", topology.New("acl-reach").DLQ(), func(q *queues[msg]) string { return q.dlq }, subscribeDead,
			func(t *testing.T, q topology.Queues[msg], n int) {
				if err := q.DeadLetter(t.Context(), topology.Letter[msg]{Value: msg{N: n}, Death: rejected("acl-reach")}); err != nil {
					t.Fatal(err)
				}
			}},
		{"broadcast", topology.New("acl-reach").Broadcast(), func(q *queues[msg]) string { return q.main }, subscribe,
			func(t *testing.T, q topology.Queues[msg], n int) {
				if err := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: n}}); err != nil {
					t.Fatal(err)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := testbroker.KafkaWithACLs(t)
			logs := &lockedBuffer{}
			b := aclBackend(t, k, logs)
			q := declare(t, b, tc.tb)
			kname := tc.topic(q.(*queues[msg]))
			r := tc.reader(t, q)
			obs := &reachLog{}
			r.(topology.ReachReporter).ReportReach(obs)
			tc.write(t, q, 1)
			l := receiveOne(t, r)
			if err := r.Settle(t.Context(), &l); err != nil {
				t.Fatal(err)
			}
			if _, any := obs.last(); any {
				t.Fatalf("reports %s while the reader reads, want none", obs)
			}

			k.Deny(t, kname, sarama.AclOperationRead)
			tc.write(t, q, 2)
			state := func() string {
				ps, _ := partitionOf(b, kname)
				return fmt.Sprintf("reports %s; partition %+v; log:\n%s", obs, ps, logs.String())
			}
			wait.For(t, "the reader to report it cannot read", func() bool {
				err, any := obs.last()
				return any && err != nil
			}, state)
			err, _ := obs.last()
			if !errors.Is(err, sarama.ErrTopicAuthorizationFailed) || !strings.Contains(err.Error(), kname) {
				t.Fatalf("Degrade(%v), want an error wrapping sarama.ErrTopicAuthorizationFailed naming topic %s", err, kname)
			}
			if strings.Contains(err.Error(), k.Password) {
				t.Fatalf("Degrade(%v) shows the password", err)
			}
			wait.For(t, "the partition's figures to say its fetches fail", func() bool {
				ps, ok := partitionOf(b, kname)
				return ok && errors.Is(ps.FetchErr, sarama.ErrTopicAuthorizationFailed) &&
					strings.Contains(ps.FetchErr.Error(), kname)
			}, state)

			k.Grant(t, kname, sarama.AclOperationRead)
			l = receiveOne(t, r)
			if l.Value.N != 2 {
				t.Fatalf("delivered letter %d once granted back, want 2", l.Value.N)
			}
			// Cleared as the record was fetched, before it was buffered.
			if ps, _ := partitionOf(b, kname); ps.FetchErr != nil {
				t.Fatalf("FetchErr = %v once a record was fetched, want nil", ps.FetchErr)
			}
			if err := r.Settle(t.Context(), &l); err != nil {
				t.Fatal(err)
			}
			wait.For(t, "the reader to report it reads again, and FetchErr cleared", func() bool {
				err, _ := obs.last()
				ps, ok := partitionOf(b, kname)
				return err == nil && ok && ps.FetchErr == nil
			}, state)
		})
	}
}
