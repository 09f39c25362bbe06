package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/validate"
)

// countCommits counts the OffsetCommit requests of group at the broker.
func countCommits(c *kfake.Cluster, group string) *atomic.Int64 {
	var n atomic.Int64
	c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if req.(*kmsg.OffsetCommitRequest).Group == group {
			n.Add(1)
		}
		return nil, nil, false
	})
	return &n
}

// Guarantee: commits are batched on the commit interval, never one per
// acknowledged message.
func TestAuditCommitsAreBatched(t *testing.T) {
	const parts = 2
	group := "g-audit-batched"
	c := newCluster(t, parts)
	n := 600
	ends := produce(t, c, parts, 0, n)
	commits := countCommits(c, group)
	l := newLedger()
	opts := sourceOptions(c, group)
	opts.CommitInterval = 500 * time.Millisecond
	po := pipelineOpts("batched", newSource(t, opts), 1, l, func(*message.Message[[]byte]) error {
		time.Sleep(200 * time.Microsecond)
		return nil
	})
	po.Processors.MaxDemand = 1 // one ack per message
	p := startPipeline(t, po)
	waitFor(t, 20*time.Second, "every record", func() bool { return l.covers(ends) })
	waitFor(t, 10*time.Second, "commits at the end", func() bool { return equalOffsets(committed(c, group), ends) })
	stopPipeline(t, p)
	if got := commits.Load(); got > int64(n/10) {
		t.Fatalf("%d OffsetCommit requests for %d records acknowledged one by one: commits are not batched", got, n)
	}
}

// Guarantee: a message whose failure hook sets DispositionRetry is
// redelivered even under the default FailureCommit policy.
func TestAuditRetryDispositionRedelivers(t *testing.T) {
	const parts = 1
	group := "g-audit-retry"
	c := newCluster(t, parts)
	ends := produce(t, c, parts, 0, 50)
	l := newLedger()
	var mu sync.Mutex
	attempts := 0
	const target = 20
	po := pipelineOpts("retry", newSource(t, sourceOptions(c, group)), 1, l, func(m *message.Message[[]byte]) error {
		md, _ := message.MetadataAs[*kafka.Metadata](m)
		if md.Offset != target {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		attempts++
		if attempts == 1 {
			return errors.New("first attempt fails")
		}
		return nil
	})
	po.Processors.HandleFailed = func(_ context.Context, failed []*message.Message[[]byte]) {
		for _, m := range failed {
			m.SetDisposition(acker.DispositionRetry)
		}
	}
	p := startPipeline(t, po)
	waitFor(t, 20*time.Second, "commits at the end", func() bool { return equalOffsets(committed(c, group), ends) })
	stopPipeline(t, p)
	mu.Lock()
	defer mu.Unlock()
	if attempts != 2 {
		t.Fatalf("offset %d attempted %d times; DispositionRetry must redeliver it once", target, attempts)
	}
	if !l.handled(rec{0, target}) {
		t.Fatal("the retried record was never handled successfully")
	}
}

// Guarantee: every metadata field describes the record: topic, partition,
// offset, key, headers in order, timestamp, generation and member.
func TestAuditMetadataFields(t *testing.T) {
	const parts = 2
	group := "g-audit-md"
	c := newCluster(t, parts)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const n = 10
	recs := make([]*kgo.Record, 0, n)
	for i := range n {
		s := strconv.Itoa(i)
		recs = append(recs, &kgo.Record{Topic: testTopic, Partition: int32(i % parts), Key: []byte("k" + s), Value: []byte("v" + s),
			Timestamp: base.Add(time.Duration(i) * time.Minute),
			Headers:   []kgo.RecordHeader{{Key: "a", Value: []byte("x" + s)}, {Key: "b", Value: []byte("y" + s)}}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = cl.ProduceSync(ctx, recs...).FirstErr()
	cl.Close()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	got := map[string]kafka.Metadata{}
	keys := map[string]string{}
	l := newLedger()
	po := pipelineOpts("md", newSource(t, sourceOptions(c, group)), 1, l, func(m *message.Message[[]byte]) error {
		md, _ := message.MetadataAs[*kafka.Metadata](m)
		mu.Lock()
		got[string(m.Data)] = *md
		keys[string(m.Data)] = m.PartitionKey()
		mu.Unlock()
		return nil
	})
	p := startPipeline(t, po)
	waitFor(t, 20*time.Second, "every record", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == n })
	stopPipeline(t, p)
	for i := range n {
		s := strconv.Itoa(i)
		md, ok := got["v"+s]
		if !ok {
			t.Fatalf("record %d not seen", i)
		}
		if md.Topic != testTopic || md.Partition != int32(i%parts) || md.Offset != int64(i/parts) {
			t.Errorf("record %d: topic %q partition %d offset %d, want %q %d %d", i, md.Topic, md.Partition, md.Offset, testTopic, i%parts, i/parts)
		}
		// The ordering key routes a partition to one processor.
		if want := testTopic + "/" + strconv.Itoa(i%parts); keys["v"+s] != want {
			t.Errorf("record %d: partition key %q, want %q", i, keys["v"+s], want)
		}
		if string(md.Key) != "k"+s {
			t.Errorf("record %d: key %q", i, md.Key)
		}
		if len(md.Headers) != 2 || string(md.Headers[0].Key) != "a" || string(md.Headers[0].Value) != "x"+s ||
			string(md.Headers[1].Key) != "b" || string(md.Headers[1].Value) != "y"+s {
			t.Errorf("record %d: headers %q", i, md.Headers)
		}
		if want := base.Add(time.Duration(i) * time.Minute); !md.Timestamp.Equal(want) {
			t.Errorf("record %d: timestamp %v, want %v", i, md.Timestamp, want)
		}
		if md.GenerationID <= 0 || md.MemberID == "" {
			t.Errorf("record %d: generation %d member %q, want the claim's", i, md.GenerationID, md.MemberID)
		}
	}
}

// Guarantee: the source owns the sarama fields it documents: whatever the
// user's Config holds for the initial offset and auto-commit, InitialOffset
// and CommitInterval decide (the group reads from the start and commits on
// the interval while running).
func TestAuditOwnedConfigFieldsOverridden(t *testing.T) {
	const parts = 2
	group := "g-audit-owned"
	c := newCluster(t, parts)
	ends := produce(t, c, parts, 0, 100)
	opts := sourceOptions(c, group)
	opts.Config.Consumer.Offsets.Initial = sarama.OffsetNewest
	opts.Config.Consumer.Offsets.AutoCommit.Enable = false
	opts.Config.Consumer.Offsets.AutoCommit.Interval = time.Hour
	l := newLedger()
	p := startPipeline(t, pipelineOpts("owned", newSource(t, opts), 1, l, nil))
	defer stopPipeline(t, p)
	waitFor(t, 20*time.Second, "every record from the earliest offset", func() bool { return l.covers(ends) })
	// Still running: only the interval commits.
	waitFor(t, 10*time.Second, "interval commits at the end", func() bool { return equalOffsets(committed(c, group), ends) })
}

// Guarantee: option rules the tags express are enforced: durations must be
// positive, the strategy must be known and no topic may be empty.
func TestAuditOptionRules(t *testing.T) {
	_, err := kafka.New(kafka.Options{Brokers: []string{"127.0.0.1:9092"}, GroupID: "g", Topics: []string{""},
		CommitInterval: -time.Second, RedeliveryBackoff: -time.Second, RevokeTimeout: -time.Second,
		Rebalance: "bogus", Config: testConfig()})
	var es validate.Errors
	if err == nil || !errors.As(err, &es) {
		t.Fatalf("invalid options accepted or not reported as validate.Errors: %v", err)
	}
	for _, want := range []struct{ field, rule string }{
		{"kafka.topics[0]", "required"},
		{"kafka.commitInterval", "gt"},
		{"kafka.redeliveryBackoff", "gt"},
		{"kafka.revokeTimeout", "gt"},
		{"kafka.rebalance", "oneof"},
	} {
		if !es.Has(want.field, want.rule) {
			t.Errorf("no %s/%s error in %v", want.field, want.rule, err)
		}
	}
}

// Guarantee: a revoked partition waits (within RevokeTimeout) only for the
// messages that had left the stage buffer (the withdrawn ones are
// forgotten), commits them, and so the next owner does not handle them
// again: no duplicates and no "still in flight" release when the handler
// finishes in time.
func TestAuditRevokeWaitsForInFlight(t *testing.T) {
	group := "g-audit-wait"
	c := newCluster(t, 1, kfake.SeedTopics(1, "other"))
	ends := produce(t, c, 1, 0, 200)
	var joins atomic.Int64
	rebalancing := make(chan struct{})
	var rebOnce sync.Once
	c.ControlKey(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if req.(*kmsg.JoinGroupRequest).Group == group && joins.Add(1) >= 3 {
			// A's first join is two requests (member id, then join), B's
			// first one starts the rebalance.
			rebOnce.Do(func() { close(rebalancing) })
		}
		return nil, nil, false
	})
	l := newLedger()
	logs := logCapture{mu: &sync.Mutex{}, msgs: &[]string{}}
	opts := sourceOptions(c, group)
	opts.RevokeTimeout = 3 * time.Second
	opts.Logger = slog.New(logs)
	release := make(chan struct{})
	unblock := sync.OnceFunc(func() { close(release) })
	defer unblock()
	po := pipelineOpts("a", newSource(t, opts), 1, l, func(m *message.Message[[]byte]) error {
		if md, _ := message.MetadataAs[*kafka.Metadata](m); md.Offset == 5 && md.GenerationID == 1 {
			<-release
		}
		return nil
	})
	po.Processors.Concurrency = 1
	po.Producer.Flow = producer.Flow{Initial: 300} // more than the processor holds: the rest is withdrawn
	a := startPipeline(t, po)
	waitFor(t, 10*time.Second, "A to handle the first records", func() bool { return l.handled(rec{0, 4}) })
	bo := sourceOptions(c, group)
	bo.Topics = []string{"other"}
	b := startPipeline(t, pipelineOpts("b", newSource(t, bo), 1, newLedger(), nil))
	select {
	case <-rebalancing:
	case <-time.After(10 * time.Second):
		t.Fatal("B never joined the group")
	}
	// A notices the rebalance and its claim waits for the stuck message.
	waitFor(t, 10*time.Second, "A's partition to be releasing", func() bool { return logs.has("kafka partition releasing") })
	unblock()
	waitFor(t, 20*time.Second, "every record", func() bool { return l.covers(ends) })
	waitFor(t, 10*time.Second, "commits at the end", func() bool { return equalOffsets(committed(c, group), ends) })
	stopPipeline(t, b)
	stopPipeline(t, a)
	if d := l.duplicates(); d != 0 {
		t.Fatalf("%d records handled twice: the revoke did not wait for the in-flight messages", d)
	}
	if logs.has("kafka partition released with messages still in flight; they will be delivered again") {
		t.Fatal("the revoke waited out RevokeTimeout: withdrawn messages were still counted as in flight")
	}
}

// Guarantee: a partition commits what was handled as soon as it is
// released, without waiting for the commit interval or for the other
// partitions of the session to finish their in-flight messages.
func TestAuditReleaseCommitsAtOnce(t *testing.T) {
	const parts = 2
	group := "g-audit-release"
	c := newCluster(t, parts, kfake.SeedTopics(1, "other"))
	ends := produce(t, c, parts, 0, 100)
	l := newLedger()
	opts := sourceOptions(c, group)
	opts.CommitInterval = time.Hour // no interval commit during the test
	opts.Config.Consumer.Group.Rebalance.Timeout = 20 * time.Second
	opts.RevokeTimeout = 15 * time.Second
	opts.Unordered = true
	release := make(chan struct{})
	unblock := sync.OnceFunc(func() { close(release) })
	defer unblock()
	po := pipelineOpts("a", newSource(t, opts), 1, l, func(m *message.Message[[]byte]) error {
		if md, _ := message.MetadataAs[*kafka.Metadata](m); md.Partition == 0 && md.Offset == 5 && md.GenerationID == 1 {
			<-release // partition 0 keeps the session's revoke waiting
		}
		return nil
	})
	po.Processors.Concurrency = 4
	po.Processors.MaxDemand = 1
	a := startPipeline(t, po)
	waitFor(t, 10*time.Second, "partition 1 handled", func() bool { return l.covers(map[int32]int64{1: ends[1]}) })
	if got := committed(c, group); len(got) != 0 {
		t.Fatalf("committed %v before any release with an hour-long interval", got)
	}
	// B joins on another topic: the eager rebalance revokes both partitions
	// of A; partition 0 waits for its stuck message, partition 1 is done.
	bo := sourceOptions(c, group)
	bo.Topics = []string{"other"}
	b := startPipeline(t, pipelineOpts("b", newSource(t, bo), 1, newLedger(), nil))
	waitFor(t, 8*time.Second, "partition 1 committed at its end while partition 0 still waits", func() bool {
		return committed(c, group)[1] == ends[1]
	})
	if got := committed(c, group)[0]; got > 5 {
		t.Fatalf("partition 0 committed %d past its unhandled offset 5", got)
	}
	unblock()
	stopPipeline(t, b)
	stopPipeline(t, a)
}

// logCapture is a slog handler that keeps the messages it is given.
type logCapture struct {
	mu   *sync.Mutex
	msgs *[]string
}

func (h logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (h logCapture) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	*h.msgs = append(*h.msgs, r.Message)
	h.mu.Unlock()
	return nil
}
func (h logCapture) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h logCapture) WithGroup(string) slog.Handler      { return h }

func (h logCapture) has(msg string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range *h.msgs {
		if m == msg {
			return true
		}
	}
	return false
}

// Guarantee: the source owns Consumer.Return.Errors: consumer errors reach
// the source's Logger even when the user's Config turned them off, and the
// source recovers from them.
func TestAuditConsumerErrorsLogged(t *testing.T) {
	const parts = 1
	group := "g-audit-errors"
	c := newCluster(t, parts)
	ends := produce(t, c, parts, 0, 20)
	faults := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: testTopic, Err: kerr.KafkaStorageError, Count: 2})
	defer faults.Remove()
	logs := logCapture{mu: &sync.Mutex{}, msgs: &[]string{}}
	opts := sourceOptions(c, group)
	opts.Config.Consumer.Return.Errors = false
	opts.Logger = slog.New(logs)
	l := newLedger()
	p := startPipeline(t, pipelineOpts("errors", newSource(t, opts), 1, l, nil))
	waitFor(t, 20*time.Second, "every record despite fetch errors", func() bool { return l.covers(ends) })
	waitFor(t, 10*time.Second, "the fetch error logged by the source", func() bool { return logs.has("kafka consumer error") })
	stopPipeline(t, p)
	if faults.Hits() == 0 {
		t.Fatal("the fetch fault was not exercised")
	}
}

// rawMember is a plain sarama group member that claims partitions and
// handles nothing (it marks no offset).
type rawMember struct {
	mu      sync.Mutex
	claimed map[int32]bool
}

func (r *rawMember) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (r *rawMember) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (r *rawMember) ConsumeClaim(_ sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	r.mu.Lock()
	r.claimed[claim.Partition()] = true
	r.mu.Unlock()
	for range claim.Messages() {
	}
	return nil
}

func (r *rawMember) partitions() []int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ps []int32
	for p := range r.claimed {
		ps = append(ps, p)
	}
	return ps
}

// Guarantee: under cooperative-sticky, a partition revoked with a message
// still in flight and later assigned back to the same member (same session,
// new claim) is never moved by the late ack of the old claim: every commit
// of the new claim covers only offsets the new claim handled.
func TestAuditStaleClaimAckCooperative(t *testing.T) {
	const parts = 2
	group := "g-audit-coop-stale"
	c := newCluster(t, parts)
	ends := produce(t, c, parts, 0, 2*100)

	var mu sync.Mutex
	firstGen := int32(-1)
	moved := int32(-1)               // the partition that went to the raw member and came back
	handledLater := map[int64]bool{} // offsets of moved handled after it came back
	var violations []string
	c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.OffsetCommitRequest)
		if r.Group != group {
			return nil, nil, false
		}
		mu.Lock()
		defer mu.Unlock()
		for _, tp := range r.Topics {
			for _, pp := range tp.Partitions {
				if pp.Partition != moved || pp.Offset <= 5 {
					continue
				}
				for o := int64(5); o < pp.Offset; o++ {
					if !handledLater[o] {
						violations = append(violations, fmt.Sprintf("partition %d committed %d but the new claim did not handle %d", pp.Partition, pp.Offset, o))
						break
					}
				}
			}
		}
		return nil, nil, false
	})

	release := make(chan struct{})
	unblock := sync.OnceFunc(func() { close(release) })
	defer unblock()
	back := make(chan struct{})
	var backOnce sync.Once
	l := newLedger()
	opts := sourceOptions(c, group)
	opts.Rebalance = kafka.RebalanceCooperativeSticky
	opts.Unordered = true
	opts.RevokeTimeout = 300 * time.Millisecond
	logs := logCapture{mu: &sync.Mutex{}, msgs: &[]string{}}
	opts.Logger = slog.New(logs)
	po := pipelineOpts("a", newSource(t, opts), 1, l, func(m *message.Message[[]byte]) error {
		md, _ := message.MetadataAs[*kafka.Metadata](m)
		mu.Lock()
		if firstGen < 0 {
			firstGen = md.GenerationID
		}
		first := md.GenerationID == firstGen
		isMoved := md.Partition == moved
		mu.Unlock()
		if first {
			if md.Offset == 5 {
				<-release // stuck in the first claim, acknowledged late
			}
			return nil
		}
		if isMoved {
			backOnce.Do(func() { close(back) })
			time.Sleep(30 * time.Millisecond) // the new claim goes slowly
			mu.Lock()
			handledLater[md.Offset] = true
			mu.Unlock()
		}
		return nil
	})
	po.Processors.Concurrency = 4
	po.Processors.MaxDemand = 1
	a := startPipeline(t, po)
	waitFor(t, 10*time.Second, "A to handle all but offset 5", func() bool {
		return l.handled(rec{0, 99}) && l.handled(rec{1, 99})
	})

	// A raw member joins: one partition moves to it, with offset 5 stuck in
	// A's old claim; then it leaves and the partition comes back to A.
	cfg := testConfig()
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyCooperativeSticky()}
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	raw, err := sarama.NewConsumerGroup(c.ListenAddrs(), group, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rm := &rawMember{claimed: map[int32]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if err := raw.Consume(ctx, []string{testTopic}, rm); err != nil {
				return
			}
		}
	}()
	waitFor(t, 20*time.Second, "a partition moving to the raw member", func() bool { return len(rm.partitions()) > 0 })
	mu.Lock()
	moved = rm.partitions()[0]
	mu.Unlock()
	waitFor(t, 10*time.Second, "A's old claim to give up on offset 5 (RevokeTimeout) and be released", func() bool {
		return logs.has("kafka partition released with messages still in flight; they will be delivered again")
	})
	cancel()
	<-done
	if err := raw.Close(); err != nil {
		t.Logf("raw member closed: %v", err)
	}
	select {
	case <-back:
	case <-time.After(20 * time.Second):
		t.Fatal("the partition did not come back to A")
	}
	unblock() // the old claim's late ack
	waitFor(t, 30*time.Second, "commits at the end", func() bool { return equalOffsets(committed(c, group), ends) })
	stopPipeline(t, a)
	mu.Lock()
	defer mu.Unlock()
	if len(violations) > 0 {
		t.Fatalf("%d commits covered offsets the new claim had not handled; first: %s", len(violations), violations[0])
	}
}
