package kafkatopology

import (
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: the letters waiting in a hold partition count in the Waiting
// of the next backend's releaser once it holds the first of them, before
// it releases (and commits) anything: with the hold group's committed
// offset, those after it; without one, those the log holds, not the
// records deleted below its start.
func TestLettersWaitingAcrossARestartCountBeforeTheReleasersFirstCommit(t *testing.T) {
	for _, tc := range []struct {
		name           string
		stray, deleted int64 // a record skipped and committed first; records deleted below the log start
	}{{"committed offset", 1, 0}, {"no committed offset", 0, 0}, {"no committed offset, records deleted", 0, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			c := testbroker.Kafka(t)
			tb := topology.New("restart-held").Hold(time.Hour)
			b := newBackend(t, c.ListenAddrs())
			q := declare(t, b, tb)
			hold := q.(*queues[msg]).holds[0].name
			if tc.stray > 0 {
				if err := b.send(&sarama.ProducerMessage{Topic: hold, Partition: 0, Value: sarama.StringEncoder(`{"N":1}`)}); err != nil {
					t.Fatal(err)
				}
				wait.For(t, "the stray record skipped and committed", func() bool {
					h, ok := holdOf(b, hold, 0)
					return ok && h.Committed == 1
				}, holdsState(b))
			}
			const held = 3
			for n := range held {
				if err := q.Hold(t.Context(), 0, topology.Letter[msg]{Value: msg{N: n}}); err != nil {
					t.Fatal(err)
				}
			}
			topologytest.MustClose(t, "the backend", b.Close)
			end := tc.stray + held
			if tc.deleted > 0 {
				admin := testbroker.Admin(t, c.ListenAddrs())
				if err := admin.DeleteRecords(hold, map[int32]int64{0: tc.deleted}); err != nil {
					t.Fatal(err)
				}
			}

			next := newBackend(t, c.ListenAddrs())
			declare(t, next, tb)
			var first HoldStats
			wait.For(t, "the next backend's releaser holding the first letter", func() bool {
				h, ok := holdOf(next, hold, 0)
				first = h
				return ok && h.Next > 0
			}, holdsState(next))
			if want := end - tc.stray - tc.deleted; first.HighWater != end || first.Waiting != want {
				t.Fatalf("figures %+v: want HighWater %d and Waiting %d, the letters in the partition", first, end, want)
			}
		})
	}
}
