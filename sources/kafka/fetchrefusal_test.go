package kafka_test

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/repeatlog"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/sources/kafka/internal/claim"
)

// expectRunFails checks that Run (done) returns within 20s with an error
// wrapping want and brokerErr whose message names what and partition 0
// of the test topic.
func expectRunFails(t *testing.T, done <-chan error, want, brokerErr error, what string) {
	t.Helper()
	var err error
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("Run did not return within 20s of the %s's refusal", what)
	}
	if !errors.Is(err, want) || !errors.Is(err, brokerErr) {
		t.Fatalf("Run = %v, want an error wrapping %v and %v", err, want, brokerErr)
	}
	if msg := err.Error(); !strings.Contains(msg, what) || !strings.Contains(msg, `"`+testTopic+`"/0`) {
		t.Fatalf("Run's error %q does not name the %s and the partition", msg, what)
	}
}

// refuseFetches makes a one-broker cluster whose partition 0 of the test
// topic holds records 0 to 9 and which answers each Fetch of the test
// topic with code, count times (-1: for good), those that when accepts
// (nil: every one). It returns the cluster, the partition's end offsets
// and the fault.
func refuseFetches(t *testing.T, code *kerr.Error, count int, when func(kmsg.Request) bool) (*kfake.Cluster, map[int32]int64, *kfake.FaultHandle) {
	t.Helper()
	c := newCluster(t, 1, kfake.NumBrokers(1))
	ends := produce(t, c, 1, 0, 10)
	faults := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: testTopic, Err: code, Count: count, When: when})
	t.Cleanup(faults.Remove)
	return c, ends, faults
}

// expectFetchRefusalEndsRun runs, for each code (a subtest named after
// it) and with either client, a member of group "g-"+name whose every
// Fetch the cluster answers with code, and checks with expectRunFails
// that Run returns within 20s with an error wrapping want and the
// client's error for code, naming the fetch and partition 0.
func expectFetchRefusalEndsRun(t *testing.T, name string, want error, codes ...*kerr.Error) {
	t.Helper()
	for _, code := range codes {
		t.Run(code.Message, func(t *testing.T) {
			eachClient(t, func(t *testing.T, cl client) {
				c, _, _ := refuseFetches(t, code, -1, nil)
				done := runOnce(t, name, cl.new(t, sourceOptions(c, "g-"+name)))
				expectRunFails(t, done, want, cl.brokerErr(code), "fetch")
			})
		})
	}
}

// Guarantee: a Fetch the cluster refuses for a claimed partition with an
// authorization error (TOPIC_AUTHORIZATION_FAILED and its kin) ends the
// member, with either client: Run returns within a bound with an error
// wrapping ErrDenied and the broker's error, naming the fetch and the
// partition, so that the pipeline's restart policy decides, rather than
// the partition stalling for ever behind a WARN line per fetch.
func TestRunFailsWhenAFetchIsRefusedForGood(t *testing.T) {
	expectFetchRefusalEndsRun(t, "fetch-refused", kafka.ErrDenied, kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed)
}

// Guarantee: a Fetch the cluster answers for a claimed partition with an
// error Kafka says not to retry that is no authorization refusal
// (UNSUPPORTED_COMPRESSION_TYPE, INVALID_RECORD, UNSUPPORTED_VERSION)
// ends the member, with either client: Run returns within a bound with an
// error wrapping ErrFetchRefused and the broker's error, naming the fetch
// and the partition, so that the pipeline's restart policy decides,
// rather than the partition being fetched again for ever.
func TestRunFailsWhenAFetchIsAnsweredWithAnErrorNotToRetry(t *testing.T) {
	codes := []*kerr.Error{kerr.UnsupportedCompressionType, kerr.InvalidRecord, kerr.UnsupportedVersion}
	for _, code := range codes {
		if kerr.IsRetriable(code) {
			t.Fatalf("%v is retriable", code)
		}
	}
	expectFetchRefusalEndsRun(t, "fetch-not-retried", kafka.ErrFetchRefused, codes...)
}

// Guarantee: a Fetch the cluster refuses for a claimed partition with an
// error that is no refusal for good (UNKNOWN_SERVER_ERROR, which the
// franz-go client hands over; sarama's partition consumer hands over
// every error it does not retry itself) is fetched again, with either
// client: the member does not fail, every record is delivered once the
// cluster answers, and the run of failed fetches is logged on one WARN
// line, not one per fetch (with sarama, at most one more: a refusal's
// error forwarded after the records fetched next begins a run of its
// own).
func TestFetchRefusedForNowIsRetriedWithOneLogLine(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const refusals = 6
		c, ends, faults := refuseFetches(t, kerr.UnknownServerError, refusals, nil)
		logs := &logtest.Records{}
		o := sourceOptions(c, "g-fetch-retried")
		o.Logger = slog.New(logs)
		l := newLedger()
		done := runOnceInto(t, "fetch-retried", cl.new(t, o), l)
		wait.Within(t, 30*time.Second, "every record once the fetches are answered", func() bool { return l.covers(ends) })
		if n := faults.Hits(); n != refusals {
			t.Fatalf("the fetch was refused %d times, want %d", n, refusals)
		}
		expectRunning(t, done, "after fetches refused with a passing error")
		// sarama forwards a claim's errors on a goroutine of its own: the
		// last refusal's may come after the records fetched next, and
		// begin one run more (docs/kafka.md, Logging).
		most := 1
		if cl.name == saramaClient.name {
			most = 2
		}
		if n := logs.Count(slog.LevelWarn, "kafka consumer error"); n < 1 || n > most {
			t.Fatalf("%d WARN lines for %d refused fetches, want 1 (at most %d)", n, refusals, most)
		}
	})
}

// startRewoundFetchRefusal starts a sarama member whose handler fails
// record 5 of partition 0 once, with FailureRedeliver: the redelivery
// then rewinds the partition, and the Fetch requests of the rewound
// consumer (from offset 5) are answered with code, count times (-1: for
// good). It returns Run's result and the fault.
func startRewoundFetchRefusal(t *testing.T, group string, code *kerr.Error, count int, l *ledger, logger *slog.Logger) (<-chan error, *kfake.FaultHandle) {
	t.Helper()
	var armed atomic.Bool
	c, _, faults := refuseFetches(t, code, count, func(req kmsg.Request) bool {
		if !armed.Load() {
			return false
		}
		for _, rt := range req.(*kmsg.FetchRequest).Topics {
			for _, rp := range rt.Partitions {
				if rp.Partition == 0 && rp.FetchOffset <= 5 {
					return true // the rewound consumer's
				}
			}
		}
		return false
	})
	o := sourceOptions(c, group)
	o.FailurePolicy = kafka.FailureRedeliver
	o.Logger = logger
	src := newSource(t, o)
	var failed atomic.Bool
	opts := pipelineOpts("rewound-fetch", src, 1, l, func(m *message.Message[[]byte]) error {
		if md, _ := message.MetadataAs[*kafka.Metadata](m); md.Partition == 0 && md.Offset == 5 && failed.CompareAndSwap(false, true) {
			armed.Store(true)
			return errors.New("fails once")
		}
		return nil
	})
	return startOnce(t, opts, src), faults
}

// Guarantee: with the sarama source, a Fetch of a partition rewound to
// redeliver a failed record (FailureRedeliver) that the cluster refuses
// with an authorization error ends the member: Run returns within a
// bound with an error wrapping ErrDenied and the broker's error, naming
// the fetch and the partition, rather than the rewound partition
// stalling for ever behind a WARN line per fetch.
func TestRunFailsWhenTheRewoundFetchIsRefusedForGood(t *testing.T) {
	code := kerr.TopicAuthorizationFailed
	done, _ := startRewoundFetchRefusal(t, "g-rewound-fetch-refused", code, -1, newLedger(), nil)
	expectRunFails(t, done, kafka.ErrDenied, saramaClient.brokerErr(code), "fetch")
}

// Guarantee: with the sarama source, a Fetch of a rewound partition that
// the cluster refuses with an error that is no refusal for good
// (UNKNOWN_SERVER_ERROR) is fetched again: the member does not fail, the
// failed record is redelivered and handled, and the run of failed
// fetches is logged as the group's consumer errors are: one WARN line,
// not one per fetch, and one INFO line once the partition reads again.
func TestRewoundFetchRefusedForNowIsRetriedWithOneLogLine(t *testing.T) {
	const refusals = 4
	logs := &logtest.Records{}
	l := newLedger()
	done, faults := startRewoundFetchRefusal(t, "g-rewound-fetch-retried", kerr.UnknownServerError, refusals, l, slog.New(logs))
	wait.Within(t, 30*time.Second, "the failed record redelivered once the fetches are answered", func() bool {
		return faults.Hits() == refusals && l.times(rec{0, 5}) >= 1
	})
	expectRunning(t, done, "after the rewound fetches were refused with a passing error")
	if n := logs.Count(slog.LevelWarn, claim.FetchFailedLog); n != 1 {
		t.Fatalf("%d WARN lines for %d refused fetches of the rewound partition, want 1", n, refusals)
	}
	if n := logs.Count(slog.LevelInfo, claim.FetchFailedLog+claim.FetchEndedSuffix); n != 1 {
		t.Fatalf("%d INFO lines ending the run once the rewound partition read again, want 1", n)
	}
}

// times reports how many times r was handled.
func (l *ledger) times(r rec) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen[r]
}

// Guarantee: with the sarama source, a Fetch the cluster refuses for good
// for two claimed partitions at once fails the member once: Run returns
// one error, wrapping ErrDenied and naming one of the partitions, rather
// than the second failure ending the member again, and the refusal is
// logged on an ERROR line, at most once a partition (the second
// partition's refusal is logged only when sarama reports it before the
// failing member has closed its consumers).
func TestTwoPartitionsRefusedAtOnceFailTheMemberOnce(t *testing.T) {
	c := newCluster(t, 2, kfake.NumBrokers(1))
	produce(t, c, 2, 0, 10)
	code := kerr.TopicAuthorizationFailed
	// Only a Fetch of both partitions is refused: both fail on one answer.
	faults := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: testTopic, Err: code, Count: -1, When: func(req kmsg.Request) bool {
		parts := 0
		for _, rt := range req.(*kmsg.FetchRequest).Topics {
			parts += len(rt.Partitions)
		}
		return parts == 2
	}})
	t.Cleanup(faults.Remove)
	logs := &logtest.Records{}
	o := sourceOptions(c, "g-two-refused")
	o.Logger = slog.New(logs)
	done := runOnce(t, "two-refused", newSource(t, o))
	var err error
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return within 20s of the fetch's refusal")
	}
	if !errors.Is(err, kafka.ErrDenied) || !errors.Is(err, saramaClient.brokerErr(code)) {
		t.Fatalf("Run = %v, want an error wrapping %v and %v", err, kafka.ErrDenied, code)
	}
	const refused = "kafka partition fetch refused; the member fails"
	wait.Within(t, 20*time.Second, "the refusal logged", func() bool { return logs.Count(slog.LevelError, refused) >= 1 })
	if n := logs.Count(slog.LevelError, refused); n > 2 {
		t.Errorf("%d ERROR lines for the refusal of 2 partitions, want at most one a partition", n)
	}
}

// The messages of a run of failed fetches: its first line's (a prefix of
// its other lines'), and its end line's, as a text handler writes them.
const (
	fetchRunLine  = `msg="kafka consumer error`
	fetchRunBegun = `msg="kafka consumer error"`
	fetchRunEnded = `msg="kafka consumer error ended"`
)

// countRuns returns how many of lines begin a run of failed fetches and
// how many end one.
func countRuns(lines []string) (begun, ended int) {
	for _, line := range lines {
		switch {
		case strings.Contains(line, fetchRunBegun):
			begun++
		case strings.Contains(line, fetchRunEnded):
			ended++
		}
	}
	return begun, ended
}

// everyRunEnded returns the lines of the runs of failed fetches logged to
// lines once the member (recording into l) has every record of ends and
// every run logged has its end line, producing a record to each of the
// first parts partitions (added to ends) as long as a run goes on. sarama
// forwards a claim's fetch errors on a goroutine of its own, with no
// order against its records (docs/kafka.md, Logging): an error of a
// fetch made before the records read last can come after them and begin
// a run, or put its partition back into the run going on, which only the
// partition's next records end.
func everyRunEnded(t *testing.T, c *kfake.Cluster, parts int32, ends map[int32]int64, l *ledger, lines *logtest.Lines) []string {
	t.Helper()
	end := time.Now().Add(30 * time.Second)
	for {
		wait.Within(t, 30*time.Second, "every record produced", func() bool { return l.covers(ends) })
		run := lines.Matching(fetchRunLine)
		if begun, ended := countRuns(run); begun == ended {
			return run
		}
		if time.Now().After(end) {
			t.Fatalf("runs of failed fetches not ended 30s after their partitions fetched again:\n%s", strings.Join(run, ""))
		}
		for p, n := range produce(t, c, parts, 0, int(parts)) {
			ends[p] += n
		}
	}
}

// checkRunLines checks run, the lines of the runs of failed fetches once
// every one has ended (everyRunEnded), with client cl: the first begins
// the run of partitions failing alike, at WARN; the first end line, at
// INFO, ends it for its partitions fetching again (no reason), naming
// the topic and the error and counting parts partitions; with sarama, an
// error forwarded late may begin a run more for each of the extra
// partitions, with franz-go no run more begins.
func checkRunLines(t *testing.T, cl client, run []string, parts, extra int) {
	t.Helper()
	all := strings.Join(run, "")
	if len(run) == 0 || !strings.Contains(run[0], fetchRunBegun) || !strings.Contains(run[0], "level=WARN") {
		t.Fatalf("the runs of failed fetches logged:\n%s\nwant a WARN line first", all)
	}
	var end string
	for _, line := range run {
		if strings.Contains(line, fetchRunEnded) {
			end = line
			break
		}
	}
	for _, want := range []string{"level=INFO", " topic=" + testTopic + " ", fmt.Sprintf(" partitions_count=%d", parts), " error="} {
		if !strings.Contains(end, want) {
			t.Errorf("the first end line lacks %q:\n%s", want, all)
		}
	}
	if strings.Contains(end, repeatlog.ReasonKey+"=") {
		t.Errorf("the first end line has a reason; its partitions fetched again:\n%s", all)
	}
	most := 1
	if cl.name == saramaClient.name {
		most += extra
	}
	if begun, _ := countRuns(run); begun > most {
		t.Errorf("%d runs of failed fetches, want at most %d:\n%s", begun, most, all)
	}
}

// Guarantee: fetches of many partitions failing alike while the cluster
// answers them with a passing error, with either client, are one WARN
// line, not one per partition nor per fetch; once the partitions fetch
// records again, one INFO line ends the run, counting its partitions.
// With sarama, an error forwarded after the records fetched next may
// begin at most one run more for each partition, which the partition's
// next records end.
func TestFetchesFailingOnManyPartitionsLogOneWarningAndOneEndOnceTheyFetchAgain(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const parts = 16
		c := newCluster(t, parts, kfake.NumBrokers(1))
		ends := produce(t, c, parts, 0, 4*parts)
		faults := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: testTopic, Err: kerr.UnknownServerError, Count: -1})
		t.Cleanup(faults.Remove)
		var lines logtest.Lines
		o := sourceOptions(c, "g-fetch-outage")
		o.Logger = slog.New(slog.NewTextHandler(&lines, nil))
		l := newLedger()
		done := runOnceInto(t, "fetch-outage", cl.new(t, o), l)
		wait.Within(t, 30*time.Second, "fetches refused again and again", func() bool { return faults.Hits() >= 5 })
		faults.Remove()
		run := everyRunEnded(t, c, parts, ends, l, &lines)
		expectRunning(t, done, "after fetches refused with a passing error")
		checkRunLines(t, cl, run, parts, parts)
	})
}

// failingThenMoved starts, with client cl, on a one-broker cluster of 2
// partitions holding 10 records each whose Fetches of the partitions in
// failing the cluster answers with UNKNOWN_SERVER_ERROR until the fault
// is removed, a member A of group logging to lines and recording into l,
// waits for its run of failed fetches to begin, then has a member B join:
// the range strategy orders the members by their IDs, which begin with
// their client IDs, "a" and "b", so that A keeps partition 0 and B takes
// partition 1. It returns once each member reads its partition, with the
// cluster, A's Run result (a pipeline of its own, stopped with stop or
// when the test ends) and the fault.
func failingThenMoved(t *testing.T, cl client, group string, failing []int32, lines *logtest.Lines, l *ledger) (c *kfake.Cluster, done <-chan error, stop func(), faults *kfake.FaultHandle) {
	t.Helper()
	c = newCluster(t, 2, kfake.NumBrokers(1))
	produce(t, c, 2, 0, 20)
	faults = c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: testTopic, Partitions: failing, Err: kerr.UnknownServerError, Count: -1})
	t.Cleanup(faults.Remove)
	member := func(id string, logger *slog.Logger, l *ledger) (testSource, func(), <-chan error) {
		o := sourceOptions(c, group)
		o.Config.ClientID = id
		if logger != nil {
			o.Logger = logger
		}
		src := cl.new(t, o)
		ran := make(chan error, 1)
		opts := pipelineOpts(id, src, 1, l, nil)
		opts.Producer.Source = onceSource{testSource: src, done: ran}
		p := startPipeline(t, opts)
		stop := func() { stopPipeline(t, p) }
		t.Cleanup(stop)
		return src, stop, ran
	}
	a, stop, done := member("a", slog.New(slog.NewTextHandler(lines, nil)), l)
	wait.Within(t, 30*time.Second, "A's run of failed fetches to begin", func() bool { return lines.Count(`msg="kafka consumer error"`) > 0 })
	b, _, _ := member("b", nil, newLedger())
	reads := func(src testSource, part int32) func() bool {
		return func() bool {
			st := src.Stats()
			if len(st.Members) != 1 {
				return false
			}
			var parts []int32
			for _, ps := range st.Members[0].Partitions {
				parts = append(parts, ps.Partition)
			}
			return slices.Equal(parts, []int32{part})
		}
	}
	wait.Within(t, 30*time.Second, "A to read partition 0 only", reads(a, 0))
	wait.Within(t, 30*time.Second, "B to read partition 1 only", reads(b, 1))
	return c, done, stop, faults
}

// Guarantee: a partition whose fetches fail, moved to another member by a
// rebalance, leaves its run of failed fetches on the member that let it
// go, with either client: the run, left with no partition, ends at once
// with one INFO line saying so (reason=revoked), while the member runs
// on, and the run logs nothing after, not even as the member closes.
func TestAFailingPartitionMovedToAnotherMemberEndsItsRunOnce(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		var lines logtest.Lines
		_, done, stop, faults := failingThenMoved(t, cl, "g-fetch-moved", []int32{1}, &lines, newLedger())
		ended := `msg="kafka consumer error ended"`
		wait.Within(t, 30*time.Second, "A's run of failed fetches of partition 1 to end", func() bool { return lines.Count(ended) > 0 })
		expectRunning(t, done, "after its failing partition moved")
		end := lines.Matching(ended)[0]
		for _, want := range []string{"level=INFO", " topic=" + testTopic + " ", " partition=1 ", " partitions_count=1", " " + repeatlog.ReasonKey + "=" + repeatlog.ReasonRevoked} {
			if !strings.Contains(end, want) {
				t.Errorf("the end line lacks %q: %s", want, end)
			}
		}
		stop()
		faults.Remove()
		if run := lines.Matching(`msg="kafka consumer error`); len(run) != 2 {
			t.Fatalf("partition 1's fetches refused %d times, then moved to B, logged on A:\n%s\nwant one WARN line and its end", faults.Hits(), strings.Join(run, ""))
		}
	})
}

// Guarantee: a partition whose fetches fail and that the member keeps
// through a rebalance stays in its run of failed fetches, with either
// client, while the partition moved away leaves it: the run is one WARN
// line for both, goes on through the rebalance, and ends with one INFO
// line, for its partitions fetching again (no reason), counting both,
// once the kept partition fetches records again. With sarama, an error
// of the kept partition forwarded after the records it fetched next may
// begin one run more, which its next records end.
func TestAFailingPartitionKeptThroughARebalanceStaysInItsRun(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		var lines logtest.Lines
		l := newLedger()
		c, done, _, faults := failingThenMoved(t, cl, "g-fetch-kept", []int32{0, 1}, &lines, l)
		hits := faults.Hits()
		wait.Within(t, 30*time.Second, "fetches refused after the rebalance", func() bool { return faults.Hits() >= hits+5 })
		if got := lines.Matching(fetchRunLine); len(got) != 1 || !strings.Contains(got[0], "level=WARN") {
			t.Fatalf("partitions 0 and 1 failing alike, then 1 moved to B and 0 kept failing, logged on A:\n%s\nwant one WARN line", strings.Join(got, ""))
		}
		faults.Remove()
		run := everyRunEnded(t, c, 1, map[int32]int64{0: 10}, l, &lines)
		expectRunning(t, done, "after its partitions' fetches were refused")
		checkRunLines(t, cl, run, 2, 1)
	})
}
