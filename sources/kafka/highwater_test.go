package kafka_test

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// stalledLag starts a source of cl, named after group, on c's single
// partition, whose handler holds the first record it is given until the
// test ends, and waits for the before records produced so far to be taken
// in and counted as lag. It returns the partition's figures and a
// description of them.
func stalledLag(t *testing.T, cl client, c *kfake.Cluster, group string, before int64) (partition func() (kafka.PartitionStats, bool), state func() string) {
	t.Helper()
	opts := sourceOptions(c, group)
	opts.HighWaterInterval = 50 * time.Millisecond
	src := cl.new(t, opts)
	p, resume := startStalled(t, group, src, newLedger(), 5)
	t.Cleanup(func() { stopPipeline(t, p) })
	t.Cleanup(resume) // before the stop

	partition = func() (kafka.PartitionStats, bool) {
		st := src.Stats()
		if len(st.Members) != 1 || len(st.Members[0].Partitions) != 1 {
			return kafka.PartitionStats{}, false
		}
		return st.Members[0].Partitions[0], true
	}
	state = func() string {
		ps, _ := partition()
		return fmt.Sprintf("%+v", ps)
	}
	wait.For(t, "the records produced first taken in and counted as lag", func() bool {
		ps, ok := partition()
		return ok && ps.Next == before && ps.HighWater == before && ps.Lag == before
	}, state)
	return partition, state
}

// Guarantee: a partition's lag counts the records produced while its
// handlers are stuck and its records fill the read-ahead and the client's
// buffer, which stop the client fetching: the member lists the partition's
// end offset every HighWaterInterval, and the high-water mark and lag of
// Stats count from the higher of the fetched and the listed one.
func TestLagCountsRecordsProducedWhileTheBufferIsFull(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const before, after = 300, 100
		c := newCluster(t, 1)
		produce(t, c, 1, 0, before)
		partition, state := stalledLag(t, cl, c, "g-lag-full", before)

		// The handler still holds the first record: nothing is committed,
		// and the records produced now are not fetched.
		produce(t, c, 1, before, after)
		wait.For(t, "the records produced while the buffer is full counted as lag", func() bool {
			ps, ok := partition()
			return ok && ps.HighWater == before+after && ps.Lag == before+after && ps.FetchLag >= after
		}, state)
	})
}

// Guarantee: a partition's lag keeps counting the records produced while
// its handlers are stuck after the partition's leadership has moved to
// another broker: nothing is fetched, so nothing else makes the client
// learn of the move, and the listing of the end offsets finds the new
// leader itself.
func TestLagKeepsCountingAfterAPartitionsLeaderMoves(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const before, after = 300, 100
		c := newCluster(t, 1) // three brokers
		produce(t, c, 1, 0, before)
		partition, state := stalledLag(t, cl, c, "g-lag-moved", before)

		// The handler still holds the first record; the partition now has
		// another leader, and the records produced next are not fetched.
		leader := c.LeaderFor(testTopic, 0)
		if err := c.MoveTopicPartition(testTopic, 0, (leader+1)%3); err != nil {
			t.Fatal(err)
		}
		produce(t, c, 1, before, after)
		wait.For(t, "the records produced after the leader moved counted as lag", func() bool {
			ps, ok := partition()
			return ok && ps.HighWater == before+after && ps.Lag == before+after && ps.FetchLag >= after
		}, state)
	})
}

// Guarantee: a partition's lag keeps counting the records produced while
// its handlers are stuck after the broker the listing of the end offsets
// last found leading the partition stops answering it (its connections
// dropped) and the leadership moves on to a third broker: a failed
// listing looks the partition's leader up again.
func TestLagKeepsCountingAfterTheListedLeaderStopsAnswering(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const before, after, last = 300, 100, 50
		c := newCluster(t, 1) // three brokers
		produce(t, c, 1, 0, before)
		partition, state := stalledLag(t, cl, c, "g-lag-gone", before)

		leader := c.LeaderFor(testTopic, 0)
		moved := (leader + 1) % 3
		if err := c.MoveTopicPartition(testTopic, 0, moved); err != nil {
			t.Fatal(err)
		}
		produce(t, c, 1, before, after)
		wait.For(t, "the records produced after the leader moved counted as lag", func() bool {
			ps, ok := partition()
			return ok && ps.HighWater == before+after
		}, state)

		// The broker found leading drops every listing sent to it from
		// now on, and the partition moves on to the third broker.
		c.ControlKey(int16(kmsg.ListOffsets), func(kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			if c.CurrentNode() != moved {
				return nil, nil, false
			}
			return nil, errors.New("broker gone"), true
		})
		if err := c.MoveTopicPartition(testTopic, 0, (moved+1)%3); err != nil {
			t.Fatal(err)
		}
		produce(t, c, 1, before+after, last)
		wait.For(t, "the records produced after the listed leader stopped answering counted as lag", func() bool {
			ps, ok := partition()
			return ok && ps.HighWater == before+after+last && ps.Lag == before+after+last
		}, state)
	})
}

// Guarantee: a source, with either client, logs at DEBUG a claimed
// partition whose end offset its leader refused to list (a partition
// error), on one line with the topic, the partition and the error, the
// same for both clients, as the Kafka topic and topology backends do: its
// lag stops counting the records produced meanwhile, and the line says
// why. A partition listed is not logged.
func TestASourceLogsAPartitionWhoseEndIsNotListed(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const parts = 2
		c := newCluster(t, parts)
		ends := produce(t, c, parts, 0, 10)
		var lines logtest.Lines
		opts := sourceOptions(c, "g-end-refused")
		opts.HighWaterInterval = 50 * time.Millisecond
		opts.Logger = slog.New(slog.NewTextHandler(&lines, &slog.HandlerOptions{Level: slog.LevelDebug}))
		l := newLedger()
		p := startPipeline(t, pipelineOpts("end-refused", cl.new(t, opts), 1, l, nil))
		defer stopPipeline(t, p)
		wait.Within(t, 20*time.Second, "every record", func() bool { return l.covers(ends) })
		refused := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.ListOffsets}, Topic: testTopic, Partitions: []int32{1},
			Err: kerr.KafkaStorageError, Count: -1})
		defer refused.Remove()
		const notListed = `msg="kafka partition end offset not listed"`
		wait.Within(t, 10*time.Second, "the partition whose end was refused logged", func() bool {
			return lines.Count(notListed) > 0 && refused.Hits() >= 2
		})
		line := lines.Matching(notListed)[0]
		for _, want := range []string{"level=DEBUG", " topic=" + testTopic + " ", " partition=1 ",
			` error="` + cl.brokerErr(kerr.KafkaStorageError).Error() + `"`} {
			if !strings.Contains(line, want) {
				t.Errorf("the line lacks %q: %s", want, line)
			}
		}
		if n := lines.Count(notListed, " partition=0 "); n != 0 {
			t.Errorf("partition 0, whose end is listed, logged %d times:\n%s", n, strings.Join(lines.Matching(notListed), ""))
		}
	})
}
