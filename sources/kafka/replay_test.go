package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/validate"
)

// produceAt writes n records to partition 0, record i with timestamp
// base + i seconds.
func produceAt(t *testing.T, c *kfake.Cluster, from, n int, base time.Time) {
	t.Helper()
	recs := make([]*kgo.Record, 0, n)
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{Topic: testTopic, Partition: 0, Value: []byte("v" + strconv.Itoa(i)),
			Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	produceSync(t, c, recs)
}

// timestampOptions are the options of a group starting at start on
// partitions it has not committed.
func timestampOptions(c *kfake.Cluster, group string, start time.Time) kafka.Options {
	opts := sourceOptions(c, group)
	opts.InitialOffset = kafka.OffsetTimestamp
	opts.StartTime = start
	return opts
}

// first returns the first offset handled on partition 0, or -1.
func (l *ledger) first() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.order[0]) == 0 {
		return -1
	}
	return l.order[0][0]
}

// lowest returns the lowest offset handled on partition 0, or -1.
func (l *ledger) lowest() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	low := int64(-1)
	for _, o := range l.order[0] {
		if low < 0 || o < low {
			low = o
		}
	}
	return low
}

// Guarantee: with OffsetTimestamp, a partition without a committed offset
// starts at its first record whose timestamp is at or after StartTime; a
// partition with a committed offset resumes there.
func TestStartFromTimestamp(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		group := "g-timestamp"
		c := newCluster(t, 1)
		base := time.Now().Add(-time.Hour).Truncate(time.Second)
		produceAt(t, c, 0, 30, base)
		opts := timestampOptions(c, group, base.Add(10*time.Second+500*time.Millisecond)) // between records 10 and 11
		l := newLedger()
		p := startPipeline(t, pipelineOpts("ts", cl.new(t, opts), 1, l, nil))
		wait.Within(t, 20*time.Second, "the records from offset 11 on", func() bool {
			return equalOffsets(committed(c, group), map[int32]int64{0: 30})
		})
		stopPipeline(t, p)
		if first, low := l.first(), l.lowest(); first != 11 || low != 11 {
			t.Fatalf("first handled offset %d, lowest %d; want 11 (the first record at or after the start time)", first, low)
		}
		for o := int64(11); o < 30; o++ {
			if !l.handled(rec{0, o}) {
				t.Fatalf("offset %d not handled", o)
			}
		}

		// The group has committed: the start time no longer applies.
		produceAt(t, c, 30, 5, base)
		l2 := newLedger()
		p2 := startPipeline(t, pipelineOpts("ts2", cl.new(t, opts), 1, l2, nil))
		wait.Within(t, 20*time.Second, "the new records", func() bool {
			return equalOffsets(committed(c, group), map[int32]int64{0: 35})
		})
		stopPipeline(t, p2)
		if low := l2.lowest(); low != 30 {
			t.Fatalf("after a commit at 30 the group resumed at %d, want 30", low)
		}
	})
}

// Guarantee: a start time after every record starts after the newest one.
func TestStartFromTimestampAfterNewest(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		group := "g-timestamp-late"
		c := newCluster(t, 1)
		base := time.Now().Add(-time.Hour).Truncate(time.Second)
		produceAt(t, c, 0, 10, base)
		opts := timestampOptions(c, group, base.Add(time.Minute))
		src := cl.new(t, opts)
		l := newLedger()
		p := startPipeline(t, pipelineOpts("ts-late", src, 1, l, nil))
		defer stopPipeline(t, p)
		wait.Within(t, 20*time.Second, "the partition claimed", func() bool {
			st := src.Stats()
			return len(st.Members) == 1 && len(st.Members[0].Partitions) == 1
		})
		produceAt(t, c, 10, 3, base.Add(2*time.Minute))
		wait.Within(t, 20*time.Second, "the new records", func() bool {
			return equalOffsets(committed(c, group), map[int32]int64{0: 13})
		})
		if low := l.lowest(); low != 10 {
			t.Fatalf("lowest handled offset %d, want 10: the start time is after every older record", low)
		}
	})
}

// Guarantee: with BeginReset, a claimed partition starts at InitialOffset
// even though the group committed an offset, and the commit then follows
// the replay.
func TestBeginResetIgnoresCommittedOffset(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		group := "g-reset"
		c := newCluster(t, 1)
		ends := produce(t, c, 1, 0, 50)
		l := newLedger()
		p := startPipeline(t, pipelineOpts("before", cl.new(t, sourceOptions(c, group)), 1, l, nil))
		wait.Within(t, 20*time.Second, "the first run's commit", func() bool { return equalOffsets(committed(c, group), ends) })
		stopPipeline(t, p)

		opts := sourceOptions(c, group)
		opts.BeginOffset = kafka.BeginReset
		src := cl.new(t, opts)
		gate := make(chan struct{})
		open := sync.OnceFunc(func() { close(gate) })
		l2 := newLedger()
		po := pipelineOpts("reset", src, 1, l2, func(m *message.Message[[]byte]) error {
			if md, _ := message.MetadataAs[*kafka.Metadata](m); md.Offset == 20 {
				<-gate
			}
			return nil
		})
		// Each message acknowledged once handled: a chunk holding offset 20
		// must not hold back the acknowledgement of those before it.
		po.Processors.MaxDemand = 1
		p2 := startPipeline(t, po)
		defer stopPipeline(t, p2)
		defer open() // before the stop
		// The replay commits backwards, to the handled prefix.
		wait.Within(t, 20*time.Second, "the replay's commit at 20", func() bool {
			return equalOffsets(committed(c, group), map[int32]int64{0: 20})
		})
		if first := l2.first(); first != 0 {
			t.Fatalf("first handled offset after the reset %d, want 0", first)
		}
		open()
		wait.Within(t, 20*time.Second, "the replay to the end", func() bool {
			return l2.covers(ends) && equalOffsets(committed(c, group), ends)
		})
	})
}

// Guarantee: with CommitOnAck, the broker's committed offset follows the
// acknowledgements without waiting for the commit interval (an hour here).
func TestCommitOnAckFollowsAcks(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		group := "g-commit-on-ack"
		c := newCluster(t, 1)
		ends := produce(t, c, 1, 0, 100)
		opts := sourceOptions(c, group)
		opts.CommitMode = kafka.CommitOnAck
		opts.CommitInterval = time.Hour
		src := cl.new(t, opts)
		gate := make(chan struct{})
		open := sync.OnceFunc(func() { close(gate) })
		po := pipelineOpts("on-ack", src, 1, newLedger(), func(m *message.Message[[]byte]) error {
			if md, _ := message.MetadataAs[*kafka.Metadata](m); md.Offset == 30 {
				<-gate
			}
			return nil
		})
		po.Processors.MaxDemand = 1 // each message acknowledged once handled
		p := startPipeline(t, po)
		defer stopPipeline(t, p)
		defer open() // before the stop
		wait.Within(t, 10*time.Second, "a commit at 30 while offset 30 is in its handler", func() bool {
			return equalOffsets(committed(c, group), map[int32]int64{0: 30})
		})
		open()
		// The source records a commit once the broker has answered it, a
		// moment after the broker shows it: wait for both.
		wait.Within(t, 10*time.Second, "a commit at the end, in the broker and in the stats", func() bool {
			ms := src.Stats().Members
			return equalOffsets(committed(c, group), ends) && len(ms) == 1 && len(ms[0].Partitions) == 1 && ms[0].Partitions[0].Committed == ends[0]
		})
		ms := src.Stats().Members[0]
		if ms.Commits == 0 || ms.Partitions[0].Committed != ends[0] {
			t.Fatalf("stats after commits on ack: %+v", ms)
		}
	})
}

// Guarantee: the replay and commit options are validated: unknown values,
// and a start time that is missing or given without OffsetTimestamp, are
// errors naming the field and the rule.
func TestReplayOptionsValidated(t *testing.T) {
	base := kafka.Options{Brokers: []string{"127.0.0.1:9092"}, GroupID: "g", Topics: []string{"t"},
		RevokeTimeout: time.Second, Config: testConfig()}
	cases := []struct {
		name        string
		edit        func(*kafka.Options)
		field, rule string
	}{
		{"timestamp without start time", func(o *kafka.Options) { o.InitialOffset = kafka.OffsetTimestamp }, "kafka.startTime", "required_if"},
		{"start time without timestamp", func(o *kafka.Options) { o.StartTime = time.Now() }, "kafka.startTime", "excluded_unless"},
		{"unknown begin offset", func(o *kafka.Options) { o.BeginOffset = "assigned" }, "kafka.beginOffset", "oneof"},
		{"unknown commit mode", func(o *kafka.Options) { o.CommitMode = "sync" }, "kafka.commitMode", "oneof"},
	}
	for _, tc := range cases {
		o := base
		tc.edit(&o)
		_, err := kafka.New(o)
		var es validate.Errors
		if err == nil || !errors.As(err, &es) || !es.Has(tc.field, tc.rule) {
			t.Errorf("%s: error %v, want %s/%s", tc.name, err, tc.field, tc.rule)
		}
	}
	o := base
	o.InitialOffset, o.StartTime, o.BeginOffset, o.CommitMode = kafka.OffsetTimestamp, time.Now(), kafka.BeginReset, kafka.CommitOnAck
	if _, err := kafka.New(o); err != nil {
		t.Fatalf("valid replay options rejected: %v", err)
	}
	src, err := kafka.New(base)
	if err != nil {
		t.Fatal(err)
	}
	if got := src.Options(); got.BeginOffset != kafka.BeginCommitted || got.CommitMode != kafka.CommitInterval {
		t.Fatalf("defaults: begin offset %q, commit mode %q", got.BeginOffset, got.CommitMode)
	}
}

// Guarantee: with CommitOnAck a member has at most one commit in flight,
// and the advances made while it is on its way are coalesced into the next
// commit, sent as soon as it returns.
func TestCommitOnAckCoalesces(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		group := "g-commit-coalesce"
		c := newCluster(t, 1)
		ends := produce(t, c, 1, 0, 100)
		var (
			mu      sync.Mutex
			offsets []int64 // of each OffsetCommit request, as it arrives
		)
		hold := make(chan struct{})
		release := sync.OnceFunc(func() { close(hold) })
		defer release()
		// The records after the first wait for the first commit, so that it
		// is sent before they are handled.
		firstSent := make(chan struct{})
		noteFirst := sync.OnceFunc(func() { close(firstSent) })
		c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			r := req.(*kmsg.OffsetCommitRequest)
			if r.Group != group {
				return nil, nil, false
			}
			mu.Lock()
			offsets = append(offsets, r.Topics[0].Partitions[0].Offset)
			first := len(offsets) == 1
			mu.Unlock()
			if first {
				noteFirst()
				c.SleepControl(func() { <-hold }) // the first commit stays on its way
			}
			return nil, nil, false
		})
		sent := func() []int64 {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(offsets)
		}
		opts := sourceOptions(c, group)
		opts.CommitMode = kafka.CommitOnAck
		opts.CommitInterval = time.Hour
		// The held commit delays the heartbeats behind it on the coordinator's
		// connection: keep the session alive meanwhile.
		opts.Config.Consumer.Group.Session.Timeout = 10 * time.Second
		src := cl.new(t, opts)
		l := newLedger()
		po := pipelineOpts("coalesce", src, 1, l, func(m *message.Message[[]byte]) error {
			if md, _ := message.MetadataAs[*kafka.Metadata](m); md.Offset > 0 {
				<-firstSent
			}
			return nil
		})
		po.Processors.MaxDemand = 1 // each message acknowledged once handled: one advance each
		p := startPipeline(t, po)
		defer stopPipeline(t, p)
		defer release() // before the stop

		wait.Within(t, 10*time.Second, "the first commit", func() bool { return len(sent()) == 1 })
		wait.Within(t, 10*time.Second, "every record handled and marked", func() bool {
			st := src.Stats()
			return l.covers(ends) && len(st.Members) == 1 && len(st.Members[0].Partitions) == 1 &&
				st.Members[0].Partitions[0].Marked == ends[0]
		})
		if got := sent(); len(got) != 1 {
			t.Fatalf("commits %v sent while the first was on its way", got)
		}
		release()
		wait.Within(t, 10*time.Second, "the coalesced commit", func() bool { return equalOffsets(committed(c, group), ends) })
		if got := sent(); len(got) != 2 || got[1] != ends[0] {
			t.Fatalf("commits %v, want the first and then one at %d", got, ends[0])
		}
	})
}

// commitOutside commits offs for group on the test topic outside any
// group generation (as an operator's tool would, or as a group's offsets
// look after the partition's log was truncated).
func commitOutside(t *testing.T, c *kfake.Cluster, group string, offs map[int32]int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.MaxVersions(kversion.V3_0_0())) // topics by name
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group = group
	req.Generation = -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = testTopic
	for p, o := range offs {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, o
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Guarantee: a committed offset past the end of its partition (the log
// was truncated under it) is invalid: the partition starts at
// InitialOffset, and the group's commits then follow what is handled from
// there, so that a restart does not read the partition from the start
// again.
func TestCommittedOffsetPastTheEndStartsAtInitialOffset(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		group := "g-past-end"
		c := newCluster(t, 1)
		commitOutside(t, c, group, map[int32]int64{0: 100})
		ends := produce(t, c, 1, 0, 10)
		l := newLedger()
		src := cl.new(t, sourceOptions(c, group))
		p := startPipeline(t, pipelineOpts("past-end", src, 1, l, nil))
		defer stopPipeline(t, p)
		wait.Within(t, 20*time.Second, "every record handled and committed", func() bool {
			return l.covers(ends) && equalOffsets(committed(c, group), ends)
		}, func() string { return fmt.Sprintf("committed %v, stats %+v", committed(c, group), src.Stats()) })
	})
}
