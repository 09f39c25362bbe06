package kafka_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// Guarantee: a claimed partition that holds a record batch the client
// cannot decode (its CRC does not match) ends the member, with either
// client: the records before it are delivered, Run returns within a
// bound with an error wrapping ErrCorruptBatch that names the partition
// and the batch's offset, the member logs one ERROR line for it, and the
// group's offset is never committed past the batch; rather than the
// partition stalling for ever behind one WARN line while the source
// fetches the same bytes again (the franz-go client thousands of times a
// second).
func TestRunFailsWhenAPartitionHoldsABatchThatCannotBeDecoded(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		c := newCluster(t, 1, kfake.NumBrokers(1))
		ends := produce(t, c, 1, 0, 5)
		logs := &logtest.Records{}
		o := sourceOptions(c, "g-corrupt")
		o.Logger = slog.New(logs)
		l := newLedger()
		done := runOnceInto(t, "corrupt", cl.new(t, o), l)
		wait.Within(t, 30*time.Second, "the records before the batch", func() bool { return l.covers(ends) })
		// From now on (the fetch waiting for records at offset 5 is
		// answered as usual), offset 5 holds a batch that cannot be
		// decoded.
		hits := testbroker.ServeCorruptBatch(c, testTopic, 0, 5)
		var err error
		select {
		case err = <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("Run did not return within 20s of %d answers with a batch that cannot be decoded", hits.Load())
		}
		if !errors.Is(err, kafka.ErrCorruptBatch) {
			t.Fatalf("Run = %v, want an error wrapping ErrCorruptBatch", err)
		}
		if msg := err.Error(); !strings.Contains(msg, `"`+testTopic+`"/0 from offset 5`) {
			t.Fatalf("Run's error %q does not name the partition and the batch's offset", msg)
		}
		if n := logs.Count(slog.LevelError, "kafka partition fetch cannot be decoded; the member fails"); n != 1 {
			t.Fatalf("%d ERROR lines for the batch, want 1", n)
		}
		if off, ok := committed(c, "g-corrupt")[0]; ok && off > 5 {
			t.Fatalf("committed offset %d is past the batch at 5", off)
		}
	})
}

// Guarantee: a claimed partition's Fetch that the broker answers with
// CORRUPT_MESSAGE (as Kafka does for a log segment it cannot read) ends a
// sarama member: Run returns within a bound with an error wrapping
// ErrCorruptBatch and sarama.ErrInvalidMessage that names the fetch and
// the partition, rather than the partition being fetched again for ever
// behind one WARN line.
func TestRunFailsWhenTheBrokerAnswersAFetchWithCorruptMessage(t *testing.T) {
	c, _, _ := refuseFetches(t, kerr.CorruptMessage, -1, nil)
	done := runOnce(t, "corrupt-message", saramaClient.new(t, sourceOptions(c, "g-corrupt-message")))
	expectRunFails(t, done, kafka.ErrCorruptBatch, sarama.ErrInvalidMessage, "fetch")
}

// Guarantee: with the sarama source, a Fetch of a partition rewound to
// redeliver a failed record (FailureRedeliver) that the broker answers
// with CORRUPT_MESSAGE ends the member: Run returns within a bound with
// an error wrapping ErrCorruptBatch and sarama.ErrInvalidMessage, naming
// the fetch and the partition, rather than the rewound partition being
// fetched again for ever behind one WARN line.
func TestRunFailsWhenTheBrokerAnswersTheRewoundFetchWithCorruptMessage(t *testing.T) {
	done, _ := startRewoundFetchRefusal(t, "g-rewound-corrupt-message", kerr.CorruptMessage, -1, newLedger(), nil)
	expectRunFails(t, done, kafka.ErrCorruptBatch, sarama.ErrInvalidMessage, "fetch")
}
