package repeatlog_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/repeatlog"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func group(lines *logtest.Lines) *repeatlog.Group {
	return &repeatlog.Group{Prefix: "pkg", Log: slog.New(slog.NewTextHandler(lines, nil))}
}

var errDown = errors.New("kafka: client has run out of available brokers to talk to: EOF")

// Guarantee: a partition's errors within the first minute of a run are
// one line, the first, whatever their count; the first repeat due, First
// after it, says "(still)" with when the run began and its failures so
// far; the run's end is one INFO line counting them all.
func TestAPartitionsErrorsAreOneLineAMinuteThenRepeatWithTheirCountAndEndOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lines logtest.Lines
		g := group(&lines)
		ctx := context.Background()
		began := time.Now()
		for range 600 { // one every 100ms for a minute, less 100ms
			g.Error(ctx, 2, errDown, nil, slog.String("topic", "orders"))
			time.Sleep(100 * time.Millisecond)
		}
		got := lines.All()
		if len(got) != 1 || !strings.Contains(got[0], "level=WARN") || !strings.Contains(got[0], `msg="pkg: consumer group error"`) ||
			!strings.Contains(got[0], "topic=orders partition=2 error=") || strings.Contains(got[0], "failures=") {
			t.Fatalf("600 errors of one partition within a minute logged %q, want its first line alone", got)
		}
		g.Error(ctx, 2, errDown, nil, slog.String("topic", "orders"))
		got = lines.All()
		since := "since=" + began.Format("2006-01-02T15:04:05.000Z07:00")
		if len(got) != 2 || !strings.Contains(got[1], `"pkg: consumer group error (still)"`) ||
			!strings.Contains(got[1], "failures=601") || !strings.Contains(got[1], since) {
			t.Fatalf("the error %v after the first logged %q, want a line saying (still), %s, failures=601", repeatlog.First, got, since)
		}
		g.Fetched(ctx, 1) // another partition: ends nothing
		g.Fetched(ctx, 2)
		g.Fetched(ctx, 2)
		got = lines.All()
		if len(got) != 3 || !strings.Contains(got[2], "level=INFO") || !strings.Contains(got[2], `"pkg: consumer group error ended"`) ||
			!strings.Contains(got[2], "partition=2") || !strings.Contains(got[2], "failures=601") || !strings.Contains(got[2], since) {
			t.Fatalf("the partition fetching again logged %q, want one INFO line ending its run of 601 failures, %s", got, since)
		}
		g.Error(ctx, 2, errDown, nil, slog.String("topic", "orders"))
		if got = lines.All(); len(got) != 4 || strings.Contains(got[3], "(still)") {
			t.Fatalf("an error after the run ended logged %q, want a first line again", got)
		}
	})
}

// Guarantee: partitions failing with causes of different texts, and
// each text of the group's other errors, begin a run of their own with a
// first line; the failed sessions are one run; a session that starts
// ends every run, each with its INFO line.
func TestEachCauseOfPartitionsAndEachErrorTextIsLoggedOnItsOwnAndASessionEndsThemAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lines logtest.Lines
		g := group(&lines)
		ctx := context.Background()
		other, leader := errors.New("kafka: broker not connected"), errors.New("kafka: not leader for partition")
		for range 10 {
			g.Error(ctx, 0, errDown, nil)
			g.Error(ctx, 1, leader, nil)
			g.Error(ctx, -1, errDown, nil)
			g.Error(ctx, -1, other, nil)
			g.SessionFailed(ctx, slog.Any("error", errDown))
			time.Sleep(time.Second)
		}
		if n := len(lines.Matching("level=WARN")); n != 5 || len(lines.All()) != 5 {
			t.Fatalf("10 rounds of errors of 2 partitions, 2 texts and the sessions logged %q, want 5 WARN lines", lines.All())
		}
		for _, s := range []string{"partition=0", "partition=1", "error=\"" + other.Error(), "session failed; joining again"} {
			if n := len(lines.Matching(s)); n != 1 {
				t.Errorf("%d lines with %s, want 1: %q", n, s, lines.All())
			}
		}
		g.Started(ctx)
		g.Started(ctx)
		ended := lines.Matching("level=INFO")
		if len(ended) != 5 || len(lines.Matching("failures=10")) != 5 || len(lines.Matching("pkg: consumer group session started again")) != 1 {
			t.Fatalf("a session that starts logged %q, want one INFO line per run, each counting its 10 failures", ended)
		}
	})
}

// Guarantee: a failure Quiet or more after its run's last failure, the
// run's end not seen, begins a new run logged as a first line.
func TestAFailureAfterAQuietBeginsANewRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lines logtest.Lines
		rs := repeatlog.Runs[int32]{Log: slog.New(slog.NewTextHandler(&lines, nil))}
		ctx := context.Background()
		ev := repeatlog.Event{Level: slog.LevelWarn, Msg: "fetch fails", Ended: "fetches again"}
		rs.Fail(ctx, 0, ev)
		time.Sleep(repeatlog.Quiet - time.Nanosecond)
		rs.Fail(ctx, 0, ev) // counted: not due before First
		time.Sleep(repeatlog.Quiet)
		rs.Fail(ctx, 0, ev)
		got := lines.All()
		if len(got) != 2 || strings.Contains(got[1], "(still)") {
			t.Fatalf("failures at 0, Quiet-1ns and 2·Quiet-1ns logged %q, want a first line, then a first line again", got)
		}
	})
}

// Guarantee: a Runs with a Bound keeps at most that many runs: keys that
// vary without end (error texts naming offsets) cannot grow it.
func TestRunsWithABoundKeepNoMoreThanIt(t *testing.T) {
	var lines logtest.Lines
	rs := repeatlog.Runs[int]{Log: slog.New(slog.NewTextHandler(&lines, nil)), Bound: 4}
	ctx := context.Background()
	for k := range 10 {
		rs.Fail(ctx, k, repeatlog.Event{Level: slog.LevelWarn, Msg: "fails", Ended: "ended"})
	}
	rs.EndAll(ctx)
	if n := len(lines.Matching("ended")); n > 4 || n == 0 {
		t.Fatalf("10 keys with a bound of 4 ended %d runs, want 1 to 4", n)
	}
	if rs.Going() {
		t.Fatal("a run counts as going once EndAll ended them all")
	}
}

// Guarantee: a Group keeps at most MaxTexts runs of its errors without a
// partition, however many texts they have.
func TestAGroupKeepsAtMostMaxTextsRunsOfErrorTexts(t *testing.T) {
	var lines logtest.Lines
	g := group(&lines)
	ctx := context.Background()
	for i := range 2 * repeatlog.MaxTexts {
		g.Error(ctx, -1, fmt.Errorf("kafka: offset %d out of range", i), nil)
	}
	g.Started(ctx)
	if n := lines.Count("consumer group error ended"); n > repeatlog.MaxTexts || n == 0 {
		t.Fatalf("%d error texts ended %d runs, want 1 to %d", 2*repeatlog.MaxTexts, n, repeatlog.MaxTexts)
	}
}

// Guarantee: Gaps lets a failure's first repeat through, then one First
// after it, each later one twice as long after the one before, up to Max
// apart, whatever comes between.
func TestGapsDoubleUpToMax(t *testing.T) {
	var g repeatlog.Gaps
	start := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	var got []time.Duration
	for at := time.Duration(0); at <= 5*repeatlog.Max; at += time.Second {
		if g.Due(start.Add(at)) {
			got = append(got, at)
		}
	}
	var want []time.Duration
	for at, gap := time.Duration(0), repeatlog.First; at <= 5*repeatlog.Max; at, gap = at+gap, min(2*gap, repeatlog.Max) {
		want = append(want, at)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("a failure every second logged at %v, want %v", got, want)
	}
}

// Guarantee: with Idle set, failures that come further apart than Quiet
// but within Idle stay one run (a client backing off by more than a
// minute between its attempts), and a run idle for Idle is forgotten when
// another begins, so that a run nothing ends does not keep Going true.
func TestIdleKeepsSparseFailuresOneRunAndForgetsRunsLeftIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lines logtest.Lines
		rs := repeatlog.Runs[int]{Log: slog.New(slog.NewTextHandler(&lines, nil)), Idle: 5 * time.Minute}
		ctx := context.Background()
		ev := repeatlog.Event{Level: slog.LevelWarn, Msg: "reconnect fails", Ended: "reconnected"}
		for range 10 { // one every 72 s: more than Quiet apart
			rs.Fail(ctx, 1, ev)
			time.Sleep(72 * time.Second)
		}
		if n := lines.Count(`msg="reconnect fails"`); n != 1 {
			t.Fatalf("10 failures 72 s apart logged %d first lines, want 1:\n%s", n, strings.Join(lines.All(), ""))
		}
		time.Sleep(5*time.Minute - 72*time.Second) // key 1's run is now idle for Idle exactly
		rs.Fail(ctx, 2, ev)
		rs.End(ctx, 2)
		if rs.Going() {
			t.Fatal("a run idle for Idle still counts as going once another began and ended")
		}
	})
}

// consumeErr is the error of a fetch of partition part of topic orders
// failing with cause, as a client names it.
func consumeErr(part int, cause error) error {
	return fmt.Errorf("kafka: error while consuming orders/%d: %w", part, cause)
}

// Guarantee: partitions whose fetches fail alike (causes of one text, as
// when the cluster is out of reach or READ is denied) are one run: one
// WARN line naming the first partition, whatever their count; its
// repeats, at the intervals of Gaps, list the partitions still failing
// (the first logattr.MaxListed) and count them and the failures of all;
// a partition in the run failing with another cause stays in it; the run
// ends with one INFO line, counting its partitions, when the last of
// them delivers a record.
func TestPartitionsFailingAlikeAreOneRunListedOnItsRepeatsAndEndedByTheLastToFetch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lines logtest.Lines
		g := group(&lines)
		ctx := context.Background()
		const parts = 256
		fail := func(p int, cause error) {
			g.Error(ctx, int32(p), consumeErr(p, cause), cause, slog.String("topic", "orders"))
		}
		for range 600 { // every partition every 100ms for a minute, less 100ms
			for p := range parts {
				fail(p, errDown)
			}
			fail(5, errors.New("kafka: broker not connected"))
			time.Sleep(100 * time.Millisecond)
		}
		got := lines.All()
		if len(got) != 1 || !strings.Contains(got[0], "level=WARN") || !strings.Contains(got[0], "partition=0 ") ||
			!strings.Contains(got[0], "orders/0:") {
			t.Fatalf("%d partitions failing alike for a minute logged %d lines, want the first, naming partition 0:\n%s",
				parts, len(got), strings.Join(got, ""))
		}
		fail(0, errDown)
		got = lines.All()
		list := "partitions=\"[0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31]\" partitions_count=256 "
		if len(got) != 2 || !strings.Contains(got[1], "(still)") || !strings.Contains(got[1], list) ||
			!strings.Contains(got[1], fmt.Sprintf("failures=%d", 600*(parts+1)+1)) || !strings.Contains(got[1], `error="`+errDown.Error()+`"`) {
			t.Fatalf("the first failure %v on logged %q, want a (still) line with %s, failures=%d and the cause",
				repeatlog.First, got[1:], list, 600*(parts+1)+1)
		}
		for p := range 40 {
			g.Fetched(ctx, int32(p))
		}
		for range 12 { // the next repeat is due 2·First after the last
			time.Sleep(10 * time.Second)
			fail(100, errDown)
		}
		got = lines.All()
		if len(got) != 3 || !strings.Contains(got[2], "(still)") || !strings.Contains(got[2], "partitions=\"[40 41 ") ||
			!strings.Contains(got[2], "partitions_count=216 ") {
			t.Fatalf("the next repeat, 40 partitions fetching again, logged %q, want a (still) line listing from 40 and counting 216", got[2:])
		}
		for p := 40; p < parts-1; p++ {
			g.Fetched(ctx, int32(p))
		}
		if got = lines.All(); len(got) != 3 {
			t.Fatalf("partitions fetching again while one still failed logged %q, want nothing", got[3:])
		}
		g.Fetched(ctx, parts-1)
		got = lines.All()
		if len(got) != 4 || !strings.Contains(got[3], "level=INFO") || !strings.Contains(got[3], "consumer group error ended") ||
			!strings.Contains(got[3], "partition=0 ") || !strings.Contains(got[3], "partitions_count=256") ||
			!strings.Contains(got[3], fmt.Sprintf("failures=%d", 600*(parts+1)+13)) {
			t.Fatalf("the last partition fetching again logged %q, want one INFO line counting 256 partitions and %d failures",
				got[3:], 600*(parts+1)+13)
		}
		g.Fetched(ctx, 0)
		g.Started(ctx)
		if got = lines.All(); len(got) != 4 {
			t.Fatalf("the run once ended logged %q, want nothing", got[4:])
		}
	})
}

// Guarantee: a session that starts ends the run of partitions failing
// alike with one INFO line counting them, however many have not
// delivered a record since.
func TestASessionStartingEndsPartitionsFailingAlikeWithOneLine(t *testing.T) {
	var lines logtest.Lines
	g := group(&lines)
	ctx := context.Background()
	for p := range 8 {
		g.Error(ctx, int32(p), consumeErr(p, errDown), errDown)
	}
	g.Fetched(ctx, 3)
	g.Started(ctx)
	g.Started(ctx)
	if ended := lines.Matching("level=INFO"); len(ended) != 1 || !strings.Contains(ended[0], "partitions_count=8") {
		t.Fatalf("a session starting logged %q, want one INFO line counting 8 partitions", ended)
	}
	if n := len(lines.All()); n != 2 {
		t.Fatalf("8 partitions failing alike and a session starting logged %d lines, want 2:\n%s", n, strings.Join(lines.All(), ""))
	}
}

// Guarantee: partitions of several topics whose fetches fail with causes
// of one text share a run per topic, not across topics: one WARN line
// each, naming the topic and the first partition; their repeats name the
// topic and list its partitions as "topic/partition"; each run ends with
// one INFO line when the last of its partitions delivers a record.
func TestPartitionsOfSeveralTopicsFailingAlikeAreARunPerTopic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lines logtest.Lines
		fs := &repeatlog.Fetches[repeatlog.TopicPartition]{Msg: "pkg: fetch failed", Log: slog.New(slog.NewTextHandler(&lines, nil))}
		ctx := context.Background()
		fail := func() {
			for _, topic := range []string{"orders", "payments"} {
				for p := range int32(3) {
					fs.Fail(ctx, repeatlog.TopicPartition{Topic: topic, Part: p}, errDown, nil)
				}
			}
		}
		for range 60 {
			fail()
			time.Sleep(time.Second)
		}
		got := lines.All()
		if len(got) != 2 || !strings.Contains(got[0], "topic=orders partition=0 ") || !strings.Contains(got[1], "topic=payments partition=0 ") {
			t.Fatalf("3 partitions of each of 2 topics failing alike for a minute logged:\n%s\nwant one line per topic", strings.Join(got, ""))
		}
		fail()
		got = lines.All()
		if len(got) != 4 || !strings.Contains(got[2], `msg="pkg: fetch failed (still)" topic=orders partitions="[orders/0 orders/1 orders/2]" partitions_count=3 `) ||
			!strings.Contains(got[3], `topic=payments partitions="[payments/0 payments/1 payments/2]"`) {
			t.Fatalf("the repeats due logged:\n%s\nwant one per topic, listing its partitions", strings.Join(got[2:], ""))
		}
		for p := range int32(3) {
			fs.Fetched(ctx, repeatlog.TopicPartition{Topic: "orders", Part: p})
		}
		got = lines.All()
		if len(got) != 5 || !strings.Contains(got[4], `level=INFO msg="pkg: fetch failed ended" topic=orders partition=0 `) ||
			!strings.Contains(got[4], "partitions_count=3") {
			t.Fatalf("the partitions of orders fetching again logged %q, want one INFO line ending the run of orders", got[4:])
		}
		fs.EndAll(ctx)
		if got = lines.All(); len(got) != 6 || !strings.Contains(got[5], "level=INFO") || !strings.Contains(got[5], "topic=payments") {
			t.Fatalf("EndAll logged %q, want one INFO line ending the run of payments", got[5:])
		}
	})
}

// Guarantee: a partition stays in its run while the text of its cause
// changes from one failure to the next (sarama's "run out of available
// brokers" lists the errors of each attempt): no run is begun and ended
// each time, one WARN line begins it, and one INFO line ends it once its
// partitions fetch again.
func TestAPartitionWhoseCauseChangesStaysInItsRun(t *testing.T) {
	var lines logtest.Lines
	fs := &repeatlog.Partitions{Msg: "pkg: fetch failed", Log: slog.New(slog.NewTextHandler(&lines, nil))}
	ctx := context.Background()
	causes := []error{errors.New("out of brokers: EOF; EOF; EOF"), errors.New("out of brokers: EOF; EOF; EOF; EOF")}
	for i := range 20 {
		fs.Fail(ctx, 0, causes[i%2], nil)
		fs.Fail(ctx, 1, causes[(i+1)%2], nil)
	}
	if got := lines.All(); len(got) != 2 || !strings.Contains(got[0], "level=WARN") || !strings.Contains(got[1], "level=WARN") {
		t.Fatalf("two partitions failing 20 times each with causes of two alternating texts logged:\n%s\nwant 2 WARN lines, one per cause they began with", strings.Join(got, ""))
	}
	fs.Fetched(ctx, 0)
	fs.Fetched(ctx, 1)
	if got := lines.All(); len(got) != 4 || !strings.Contains(got[2], "level=INFO") || !strings.Contains(got[3], "level=INFO") {
		t.Fatalf("the partitions fetching again logged %q, want one INFO line ending each run", got[2:])
	}
}

// Guarantee: partitions that leave the consumer (Drop: a rebalance gave
// them to another) leave their runs of fetch errors: a run that keeps a
// partition goes on, its repeats listing only those it keeps, and logs
// nothing as they leave; a run left with none ends at once with one INFO
// line, counting the partitions it had, that says why (reason=revoked),
// and logs nothing after, neither a repeat nor a second end; a dropped
// partition failing again on the consumer begins a run of its own.
func TestPartitionsLeavingTheConsumerLeaveTheirRunsWhichEndOnceWithTheReasonWhenNoneIsLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lines logtest.Lines
		fs := &repeatlog.Fetches[repeatlog.TopicPartition]{Msg: "pkg: fetch failed", Log: slog.New(slog.NewTextHandler(&lines, nil))}
		ctx := context.Background()
		tp := func(p int32) repeatlog.TopicPartition { return repeatlog.TopicPartition{Topic: "orders", Part: p} }
		denied := errors.New("TOPIC_AUTHORIZATION_FAILED")
		for p := range int32(3) {
			fs.Fail(ctx, tp(p), errDown, nil)
		}
		fs.Fail(ctx, tp(3), denied, nil)
		if got := lines.All(); len(got) != 2 {
			t.Fatalf("partitions 0 to 2 failing alike and 3 otherwise logged:\n%s\nwant one WARN line per run", strings.Join(got, ""))
		}
		in := func(parts ...int32) func(repeatlog.TopicPartition) bool {
			return func(p repeatlog.TopicPartition) bool { return p.Topic == "orders" && slices.Contains(parts, p.Part) }
		}
		fs.Drop(ctx, in(1, 2))
		if got := lines.All(); len(got) != 2 {
			t.Fatalf("partitions 1 and 2 leaving the run partition 0 keeps logged %q, want nothing", got[2:])
		}
		for range 6 { // the first repeat is due First after the first line
			time.Sleep(10 * time.Second)
			fs.Fail(ctx, tp(0), errDown, nil)
		}
		got := lines.All()
		if len(got) != 3 || !strings.Contains(got[2], `msg="pkg: fetch failed (still)"`) ||
			!strings.Contains(got[2], `partitions=[orders/0] partitions_count=1 `) {
			t.Fatalf("the repeat due after partitions 1 and 2 left logged %q, want a (still) line listing partition 0 only", got[2:])
		}
		fs.Drop(ctx, in(0, 3, 4))
		got = lines.All()
		if len(got) != 5 {
			t.Fatalf("the last partitions of both runs leaving logged %q, want one end line per run", got[3:])
		}
		ends := got[3:]
		for _, want := range []string{`error="` + errDown.Error() + `" since=`, `error=` + denied.Error() + ` since=`} {
			i := slices.IndexFunc(ends, func(l string) bool { return strings.Contains(l, want) })
			if i < 0 {
				t.Fatalf("the end lines %q lack the run of %s", ends, want)
			}
			count := " partitions_count=3"
			if strings.Contains(want, denied.Error()) {
				count = " partitions_count=1"
			}
			for _, w := range []string{"level=INFO", `msg="pkg: fetch failed ended"`, count, " " + repeatlog.ReasonKey + "=" + repeatlog.ReasonRevoked} {
				if !strings.Contains(ends[i], w) {
					t.Errorf("the end line lacks %q: %s", w, ends[i])
				}
			}
		}
		time.Sleep(2 * repeatlog.First)
		fs.Fetched(ctx, tp(0))
		fs.Drop(ctx, in(0, 1, 2, 3))
		fs.EndAll(ctx)
		if got = lines.All(); len(got) != 5 {
			t.Fatalf("the runs once ended logged %q, want nothing", got[5:])
		}
		fs.Fail(ctx, tp(1), errDown, nil)
		if got = lines.All(); len(got) != 6 || !strings.Contains(got[5], `level=WARN msg="pkg: fetch failed" topic=orders partition=1 `) {
			t.Fatalf("partition 1 failing again once it had left logged %q, want the WARN line of a run beginning", got[5:])
		}
	})
}

// Guarantee: the end line of a run of fetch errors counts the partitions
// it had once each (partitions_count), however often one of them left
// the run and joined it again while the others kept it going: by
// fetching again and failing again, by leaving the consumer (Drop) and
// coming back to fail again.
func TestARunsEndCountsEachOfItsPartitionsOnce(t *testing.T) {
	var lines logtest.Lines
	fs := &repeatlog.Partitions{Msg: "pkg: fetch failed", Log: slog.New(slog.NewTextHandler(&lines, nil))}
	ctx := context.Background()
	fs.Fail(ctx, 0, errDown, nil)
	fs.Fail(ctx, 1, errDown, nil)
	fs.Fetched(ctx, 1)
	fs.Fail(ctx, 1, errDown, nil)
	fs.Drop(ctx, func(p int32) bool { return p == 1 })
	fs.Fail(ctx, 1, errDown, nil)
	fs.Fetched(ctx, 1)
	fs.Fetched(ctx, 0)
	got := lines.All()
	if len(got) != 2 || !strings.Contains(got[1], "level=INFO") || !strings.Contains(got[1], " partitions_count=2") {
		t.Fatalf("partitions 0 and 1 failing alike, 1 leaving and joining the run again twice, logged:\n%s\nwant one WARN line and one INFO line counting 2 partitions", strings.Join(got, ""))
	}
}
