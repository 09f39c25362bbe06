package kafka_test

import (
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// Guarantee: with either client and FailureRedeliver, a partition waiting
// out its RedeliveryBackoff holds back no other partition: the records
// produced to another partition of the member after the failure are
// delivered while the failed record still waits for its redelivery.
func TestAPartitionWaitingToRedeliverHoldsBackNoOtherPartition(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		c := newCluster(t, 2)
		produce(t, c, 2, 0, 20) // offsets 0 to 9 of partitions 0 and 1
		o := sourceOptions(c, "g-redeliver-wait")
		o.FailurePolicy = kafka.FailureRedeliver
		o.RedeliveryBackoff = time.Hour // not redelivered within the test
		logs := &logtest.Records{}
		o.Logger = slog.New(logs)
		src := cl.new(t, o)
		l := newLedger()
		var failed atomic.Bool
		done := startOnce(t, pipelineOpts("redeliver-wait", src, 1, l, func(m *message.Message[[]byte]) error {
			if md, _ := message.MetadataAs[*kafka.Metadata](m); md.Partition == 0 && md.Offset == 5 && failed.CompareAndSwap(false, true) {
				return errors.New("fails once")
			}
			return nil
		}), src)
		wait.Within(t, 30*time.Second, "partition 0 rewound after the failure, and partition 1's records", func() bool {
			return logs.Count(slog.LevelInfo, "kafka partition rewinds to redeliver a failed message") == 1 && l.covers(map[int32]int64{0: 5, 1: 10})
		})
		// Twice: a poll under way when the partition rewound may hand over
		// the first, the next poll must go on for the second.
		for end := int64(15); end <= 20; end += 5 {
			produceTo(t, c, 1, 5)
			wait.Within(t, 30*time.Second, "partition 1's records produced after the failure", func() bool {
				return l.covers(map[int32]int64{1: end})
			})
		}
		if l.handled(rec{0, 5}) {
			t.Fatal("the failed record was delivered again within its hour of backoff")
		}
		expectRunning(t, done, "while a partition waits to redeliver")
	})
}
