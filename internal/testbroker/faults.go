package testbroker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testsize"
	"github.com/boulevard-go/boulevard/internal/wait"
)

// errDropped is what a fault's control function returns to have kfake
// close the client's connection instead of answering.
var errDropped = errors.New("testbroker: connection dropped")

// Faults fails the requests of one key a kfake cluster receives, from
// Inject on until the test ends: while its period is k > 0, one matching
// request in k fails (1: every one), the others are answered as usual; 0
// fails none. A failure is the request refused with Code on every
// partition it names (Produce and OffsetCommit requests), or, with Code 0
// or a request of another key, its connection dropped unanswered.
type Faults struct {
	c     *kfake.Cluster
	code  int16
	match func(kmsg.Request) bool

	period atomic.Int64
	seen   atomic.Int64 // matching requests while the period was set
	failed atomic.Int64
	passed atomic.Int64 // matching requests answered as usual
}

// Inject fails requests of key to c that match (nil: every one) as Faults
// says, starting with period 0 (none). code is the error code of a
// refusal (a kerr error's Code), 0 to drop the connection instead.
func Inject(c *kfake.Cluster, key kmsg.Key, code int16, match func(kmsg.Request) bool) *Faults {
	f := &Faults{c: c, code: code, match: match}
	c.ControlKey(key.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if f.match != nil && !f.match(req) {
			return nil, nil, false
		}
		k := f.period.Load()
		if k <= 0 || f.seen.Add(1)%k != 0 {
			f.passed.Add(1)
			return nil, nil, false
		}
		f.failed.Add(1)
		c.KeepControl()
		if resp := Refusal(req, f.code); resp != nil {
			return resp, nil, true
		}
		return nil, errDropped, true
	})
	return f
}

// Every makes one matching request in k fail from now on; 0 stops the
// failures.
func (f *Faults) Every(k int) { f.period.Store(int64(k)) }

// FirstThenEvery makes the next matching request fail and, after it, one
// in k: unlike Every, it fails one however few requests come. k <= 0
// stops the failures.
func (f *Faults) FirstThenEvery(k int) {
	f.seen.Store(int64(k - 1))
	f.period.Store(int64(k))
}

// Failed counts the requests failed so far.
func (f *Faults) Failed() int64 { return f.failed.Load() }

// Passed counts the matching requests answered as usual so far.
func (f *Faults) Passed() int64 { return f.passed.Load() }

// Refusal is the answer to req refusing every partition it names with
// code, or nil when code is 0 or req is not a Produce, OffsetCommit or
// ListOffsets request.
func Refusal(req kmsg.Request, code int16) kmsg.Response {
	if code == 0 {
		return nil
	}
	switch req := req.(type) {
	case *kmsg.ProduceRequest:
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.Topics {
			t := kmsg.NewProduceResponseTopic()
			t.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				p := kmsg.NewProduceResponseTopicPartition()
				p.Partition, p.ErrorCode = rp.Partition, code
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp
	case *kmsg.OffsetCommitRequest:
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, rt := range req.Topics {
			t := kmsg.NewOffsetCommitResponseTopic()
			t.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				p := kmsg.NewOffsetCommitResponseTopicPartition()
				p.Partition, p.ErrorCode = rp.Partition, code
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp
	case *kmsg.ListOffsetsRequest:
		resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, rt := range req.Topics {
			t := kmsg.NewListOffsetsResponseTopic()
			t.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				p := kmsg.NewListOffsetsResponseTopicPartition()
				p.Partition, p.ErrorCode = rp.Partition, code
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp
	}
	return nil
}

// CommitsOf matches the OffsetCommit requests of consumer group gid.
func CommitsOf(gid string) func(kmsg.Request) bool {
	return func(req kmsg.Request) bool { return req.(*kmsg.OffsetCommitRequest).Group == gid }
}

// ProducesTo matches the Produce requests that carry records for topic.
func ProducesTo(topic string) func(kmsg.Request) bool {
	return func(req kmsg.Request) bool {
		return slices.ContainsFunc(req.(*kmsg.ProduceRequest).Topics, func(t kmsg.ProduceRequestTopic) bool { return t.Topic == topic })
	}
}

// FaultCount is how many messages a fault test publishes:
// BOULEVARD_KAFKA_FAULT_MESSAGES, or a few hundred (100 with -short).
func FaultCount(t testing.TB) int {
	return testsize.Count(t, "BOULEVARD_KAFKA_FAULT_MESSAGES", 100, 300)
}

// FaultPatience is base grown with n, the message count of a fault test
// (FaultCount or PulsarFaultCount, both 300 by default), for a wait on
// work done for every message (or a share of them): base up to the
// default count, proportionally more beyond it.
func FaultPatience(base time.Duration, n int) time.Duration {
	return Patience(base, n, 300)
}

// Patience is base grown with n, the size of a test's work whose default
// is def: base up to def, proportionally more beyond it.
func Patience(base time.Duration, n, def int) time.Duration {
	return base * time.Duration(max(1, (n+def-1)/def))
}

// LogValues reads every record of topic on brokers (Log), and the set of
// the values decode finds in them, failing t on a record it cannot
// decode.
func LogValues(t testing.TB, brokers []string, topic string, decode func([]byte) (int, error)) ([]Record, map[int]bool) {
	t.Helper()
	recs := Log(t, brokers, topic)
	vs := make(map[int]bool, len(recs))
	for _, r := range recs {
		v, err := decode(r.Value)
		if err != nil {
			t.Fatalf("record %d/%d of %q: %v", r.Partition, r.Offset, topic, err)
		}
		vs[v] = true
	}
	return recs, vs
}

// Record is one record of a topic's log: where it is and its value.
type Record struct {
	Partition int32
	Offset    int64
	Value     []byte
}

// Log reads every record of topic on brokers, from the oldest to the log
// end as of the call, partition by partition, failing t if it cannot
// within a minute.
func Log(t testing.TB, brokers []string, topic string) []Record {
	t.Helper()
	client, err := sarama.NewClient(brokers, SaramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Close() }()
	cons, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cons.Close() }()
	parts, err := client.Partitions(topic)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []Record
	for _, p := range parts {
		end, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			t.Fatal(err)
		}
		if end == 0 {
			continue
		}
		pc, err := cons.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		for done := false; !done; {
			select {
			case m := <-pc.Messages():
				out = append(out, Record{Partition: p, Offset: m.Offset, Value: m.Value})
				done = m.Offset >= end-1
			case <-ctx.Done():
				_ = pc.Close()
				t.Fatalf("reading partition %d of %q: %d records within a minute, the log ends at %d", p, topic, len(out), end)
			}
		}
		_ = pc.Close()
	}
	return out
}

// Admin is a cluster admin client of brokers, closed when t ends.
func Admin(t testing.TB, brokers []string) sarama.ClusterAdmin {
	t.Helper()
	admin, err := sarama.NewClusterAdmin(brokers, SaramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close() })
	return admin
}

// Committed returns the offsets consumer group gid has committed on the
// partitions of topic (-1 for none, on every partition when the cluster
// has never seen the group).
func Committed(t testing.TB, admin sarama.ClusterAdmin, topic, gid string) map[int32]int64 {
	t.Helper()
	desc, err := admin.DescribeTopics([]string{topic})
	if err != nil || len(desc) != 1 || desc[0].Err != sarama.ErrNoError {
		t.Fatalf("describing topic %q: %v", topic, err)
	}
	parts := make([]int32, 0, len(desc[0].Partitions))
	for _, p := range desc[0].Partitions {
		parts = append(parts, p.ID)
	}
	resp, err := admin.ListConsumerGroupOffsets(gid, map[string][]int32{topic: parts})
	if err != nil && !errors.Is(err, sarama.ErrGroupIDNotFound) {
		t.Fatal(err)
	}
	out := make(map[int32]int64, len(parts))
	for _, p := range parts {
		out[p] = -1
		if resp == nil {
			continue
		}
		if blk := resp.GetBlock(topic, p); blk != nil {
			out[p] = blk.Offset
		}
	}
	return out
}

// Ends returns the log end of each partition of records, as Log read them.
func Ends(records []Record) map[int32]int64 {
	out := map[int32]int64{}
	for _, r := range records {
		out[r.Partition] = max(out[r.Partition], r.Offset+1)
	}
	return out
}

// Ledger counts what a loss test published and what its consumers
// handled, by value; safe for concurrent use.
type Ledger struct {
	mu        sync.Mutex
	published map[int]bool // the publish returned nil
	failed    map[int]bool // the publish returned an error
	handled   map[int]int  // settled as handled (the settle returned nil)
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{published: map[int]bool{}, failed: map[int]bool{}, handled: map[int]int{}}
}

// Publish records v's publish and its outcome.
func (l *Ledger) Publish(v int, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.failed[v] = true
	} else {
		l.published[v] = true
	}
}

// Handle records v settled as handled.
func (l *Ledger) Handle(v int) {
	l.mu.Lock()
	l.handled[v]++
	l.mu.Unlock()
}

// Counts returns how many publishes returned nil and how many failed.
func (l *Ledger) Counts() (published, failed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.published), len(l.failed)
}

// Handled reports whether v was handled at least once.
func (l *Ledger) Handled(v int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.handled[v] > 0
}

// Unhandled returns, in order, the values published (their publish
// returned nil) and never handled.
func (l *Ledger) Unhandled() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int
	for v := range l.published {
		if l.handled[v] == 0 {
			out = append(out, v)
		}
	}
	sort.Ints(out)
	return out
}

// Unstored returns, in order, the values whose publish returned nil and
// that stored (the values the log holds) lacks, and those stored that
// were never published at all.
func (l *Ledger) Unstored(stored map[int]bool) (lost, unknown []int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for v := range l.published {
		if !stored[v] {
			lost = append(lost, v)
		}
	}
	for v := range stored {
		if !l.published[v] && !l.failed[v] {
			unknown = append(unknown, v)
		}
	}
	sort.Ints(lost)
	sort.Ints(unknown)
	return lost, unknown
}

// FaultKind is one way the fault tests fail a request.
type FaultKind struct {
	// Name names the kind, as a subtest.
	Name string
	// Code is the error code a request of key is refused with, 0 to
	// drop its connection instead.
	Code func(key kmsg.Key) int16
}

// FaultKinds are the two ways a request fails in the fault tests:
// refused with a retriable error code (NOT_LEADER_FOR_PARTITION for a
// produce, NOT_COORDINATOR for a commit), or its connection dropped
// unanswered.
var FaultKinds = []FaultKind{
	{"refused", func(k kmsg.Key) int16 {
		if k == kmsg.Produce {
			return kerr.NotLeaderForPartition.Code
		}
		return kerr.NotCoordinator.Code
	}},
	{"dropped", func(kmsg.Key) int16 { return 0 }},
}

// PublishRange publishes from..to-1 with publish from four goroutines
// into led, calling failed (if not nil) after each publish that fails.
func PublishRange(led *Ledger, from, to int, publish func(v int) error, failed func()) {
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for v := int(next.Add(1)) - 1; v < to; v = int(next.Add(1)) - 1 {
				err := publish(v)
				led.Publish(v, err)
				if err != nil && failed != nil {
					failed()
				}
			}
		})
	}
	wg.Wait()
}

// PublishThroughFaults publishes n values with publish while f fails one
// produce in three, and every one from the middle on until a publish
// gives up; then it checks against stored (the values the log holds,
// read once it returns) that every publish that returned nil is stored,
// that nothing stored was never published, and that publishes both
// failed and succeeded.
func PublishThroughFaults(t testing.TB, f *Faults, n int, publish func(v int) error, stored func() map[int]bool) {
	t.Helper()
	led := NewLedger()
	f.Every(3)
	PublishRange(led, 0, n/2, publish, nil)
	f.Every(1) // an outage, until a publish gives up
	PublishRange(led, n/2, n, publish, func() { f.Every(3) })
	f.Every(0)
	lost, unknown := led.Unstored(stored())
	if len(lost) > 0 {
		t.Errorf("%d publishes returned nil and their records are not in the log: %v", len(lost), lost)
	}
	if len(unknown) > 0 {
		t.Errorf("the log holds values never published: %v", unknown)
	}
	published, failed := led.Counts()
	if failed == 0 || f.Failed() == 0 || published < n/2 {
		t.Errorf("%d publishes returned nil and %d failed, %d produce requests failed: want failures of both", published, failed, f.Failed())
	}
}

// CommittedToTheEnd waits up to patience until group gid has committed
// every partition of topic up to the end of recs.
func CommittedToTheEnd(t testing.TB, c *kfake.Cluster, patience time.Duration, topic, gid string, recs []Record) {
	t.Helper()
	admin := Admin(t, c.ListenAddrs())
	ends := Ends(recs)
	var last map[int32]int64
	wait.Within(t, patience, "group "+gid+" to commit up to the log end", func() bool {
		last = Committed(t, admin, topic, gid)
		for p, e := range ends {
			if last[p] != e {
				return false
			}
		}
		return true
	}, func() string { return fmt.Sprintf("committed %v; log ends %v", last, ends) })
}

// OutOfReach makes c drop the connection of every request it receives, as
// a cluster that cannot be reached does, until until reports true (state
// describes what was seen if it does not within wait.Deadline) and the
// clients have retried 20 more requests since; then c answers again.
func OutOfReach(t testing.TB, c *kfake.Cluster, what string, until func() bool, state func() string) {
	t.Helper()
	f := Inject(c, kmsg.Key(-1), 0, nil)
	f.Every(1)
	defer f.Every(0)
	wait.For(t, what, until, state)
	failed := f.Failed()
	wait.For(t, "the clients to retry while the cluster cannot be reached", func() bool { return f.Failed() >= failed+20 })
}

// FirstRequest returns a channel closed when c receives its first request
// of kind key from then on, which c then handles as usual.
func FirstRequest(c *kfake.Cluster, key kmsg.Key) <-chan struct{} {
	seen := make(chan struct{})
	var once sync.Once
	c.ControlKey(int16(key), func(kmsg.Request) (kmsg.Response, error, bool) {
		once.Do(func() { close(seen) })
		c.DropControl()
		return nil, nil, false
	})
	return seen
}

// HoldFetches makes c answer every fetch with no records and the error
// code errCode (0: none, as for a partition with nothing new) while the
// flag it returns is true (it starts true).
func HoldFetches(c *kfake.Cluster, errCode int16) *atomic.Bool {
	var held atomic.Bool
	held.Store(true)
	c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !held.Load() {
			return nil, nil, false
		}
		freq := req.(*kmsg.FetchRequest)
		resp := freq.ResponseKind().(*kmsg.FetchResponse)
		for _, rt := range freq.Topics {
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, errCode
				sp.HighWatermark, sp.LastStableOffset = rp.FetchOffset, rp.FetchOffset
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	return &held
}

// RaceClose calls each of calls at once, on goroutines of their own, and
// closeFn once under is closed (a request of theirs has reached the
// cluster: see FirstRequest) or every call has returned. Once closeFn has
// returned, it waits for the calls and returns their results, in the order
// they returned, and closeFn's error.
func RaceClose[R any](under <-chan struct{}, calls []func() R, closeFn func() error) ([]R, error) {
	start := make(chan struct{})
	results := make(chan R, len(calls))
	var running sync.WaitGroup
	for _, call := range calls {
		running.Go(func() {
			<-start
			results <- call()
		})
	}
	returned := make(chan struct{})
	go func() {
		running.Wait()
		close(returned)
	}()
	closed := make(chan error, 1)
	go func() {
		select {
		case <-under:
		case <-returned:
		}
		closed <- closeFn()
	}()
	close(start)
	err := <-closed
	<-returned
	out := make([]R, 0, len(calls))
	for range calls {
		out = append(out, <-results)
	}
	return out, err
}

// HoldFirst makes c hold the first request of key it gets until the test
// ends, as a broker that does not answer: the cluster answers nothing
// meanwhile. held is closed once that request has arrived. The test must
// have registered c's Close before (Kafka does), so that the request is
// let go, and answered, before the cluster closes.
func HoldFirst(t testing.TB, c *kfake.Cluster, key kmsg.Key) (held <-chan struct{}) {
	t.Helper()
	heldCh := make(chan struct{})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	var once sync.Once
	c.ControlKey(int16(key), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		once.Do(func() {
			close(heldCh)
			<-release
		})
		return nil, nil, false
	})
	return heldCh
}

// ClosingPastDeadline makes c hold the first request of key (see
// HoldFirst), runs call on a goroutine of its own and, once the request
// has arrived, calls closeFn, a Close cutting its connections at its
// context's deadline, with a deadline of CloseDeadline, and fails t unless it
// returns an error wrapping context.DeadlineExceeded; it then calls
// closeFn again with no deadline, which waits for the same closing, and
// returns how long that took (how long the closing went on once its
// connections were cut) and, once call has returned, call's error. t
// fails when that took more than CloseMargin, room for a machine that
// stalls the test process.
func ClosingPastDeadline(t testing.TB, c *kfake.Cluster, key kmsg.Key, call func() error, closeFn func(context.Context) error) (callErr error) {
	t.Helper()
	held := HoldFirst(t, c, key)
	called := make(chan error, 1)
	go func() { called <- call() }()
	select {
	case <-held:
	case <-time.After(HungDeadline + HungGrace):
		t.Fatalf("the cluster never got a %s request", key.Name())
	}
	const deadline, margin = CloseDeadline, CloseMargin
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := closeFn(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close while the cluster holds a %s request = %v, want context.DeadlineExceeded", key.Name(), err)
	}
	start := time.Now()
	if err := closeFn(context.Background()); err != nil {
		t.Fatalf("a later Close = %v", err)
	}
	took := time.Since(start)
	t.Logf("the closing went on %v past Close's %v deadline", took.Round(time.Millisecond), deadline)
	if took > margin {
		t.Errorf("the closing went on %v past Close's %v deadline, which cut the %s request the cluster held; want at most %v",
			took.Round(time.Millisecond), deadline, key.Name(), margin)
	}
	return <-called
}

// RefuseProducerIDs makes c answer each InitProducerID request after the
// first pass with CLUSTER_AUTHORIZATION_FAILED, which an idempotent
// sarama producer cannot start past, and returns the count of those
// requests c received.
func RefuseProducerIDs(c *kfake.Cluster, pass int32) *atomic.Int32 {
	var n atomic.Int32
	c.ControlKey(int16(kmsg.InitProducerID), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if n.Add(1) <= pass {
			return nil, nil, false
		}
		resp := kr.(*kmsg.InitProducerIDRequest).ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil, true
	})
	return &n
}

// ExpectProducerIDRefused fails t unless err, the error of a New whose
// producer id RefuseProducerIDs refused after pass grants, wraps connect
// and sarama.ErrClusterAuthorizationFailed, says the producer id was
// refused, which permissions to grant and each of off (how the backend
// turns idempotence off), and does not show password.
func ExpectProducerIDRefused(t testing.TB, pass int32, err, connect error, password string, off ...string) {
	t.Helper()
	if !errors.Is(err, connect) || !errors.Is(err, sarama.ErrClusterAuthorizationFailed) {
		t.Fatalf("producer ids granted %d: New = %v, want an error wrapping %v and sarama.ErrClusterAuthorizationFailed", pass, err, connect)
	}
	msg := err.Error()
	t.Logf("producer ids granted %d: New = %q", pass, msg)
	for _, want := range append([]string{"refused the idempotent producer a producer id", "WRITE on a topic", "IdempotentWrite on the cluster"}, off...) {
		if !strings.Contains(msg, want) {
			t.Errorf("producer ids granted %d: New = %q, want it to say %q", pass, msg, want)
		}
	}
	if strings.Contains(msg, password) {
		t.Errorf("producer ids granted %d: New = %q shows the password", pass, msg)
	}
}

// OnceInOrder fails t unless got, the values a partition holds, is 0..n-1
// in order: each stored once, none reordered. what names the records.
func OnceInOrder(t testing.TB, what string, got []int, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("the partition holds %d %s, want %d (%d duplicates): %v", len(got), what, n, len(got)-n, got)
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("%s %d of the partition is %d, want %d: %v", what, i, v, i, got)
		}
	}
}
