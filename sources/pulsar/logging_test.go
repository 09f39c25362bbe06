package pulsar_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/wait"
)

// The source logs through its producer stage's logger only (Options.Logger
// receives nothing), and one event is one line: a consumer closed under
// its stage is logged once, by the stage that restarts.
func TestSourceLogsThroughStageLoggerOnce(t *testing.T) {
	e := newEnv(t)
	want := e.publish("logs", "m", 50)
	own, stage := newRecords(), newRecords()
	r := newReceived()
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"logs"}, Subscription: "sub", Consumer: earliest(),
		Logger: slog.New(own)})
	start(t, pipeline.Options[[]byte, []byte]{
		Name:   "logs",
		Logger: slog.New(stage),
		Producer: producer.Options[[]byte]{Source: src, Flow: producer.Flow{Initial: 30, Threshold: 10, Refill: 20},
			Restart: producer.Restart{Backoff: 20 * time.Millisecond}},
		Processors: processor.Options[[]byte, []byte]{Handle: recordAll(r)},
	})
	wait.Within(t, waitLimit, "every message handled", func() bool { return r.distinct() == len(want) })
	if !src.CloseConsumerForTest() {
		t.Fatal("no open consumer to close")
	}
	closedLines := func() (n int) {
		for _, l := range stage.snapshot() {
			for _, a := range l.attrs {
				if err, ok := a.Value.Any().(error); ok && errors.Is(err, bpulsar.ErrConsumerClosed) {
					n++
				}
			}
		}
		return n
	}
	wait.Within(t, waitLimit, "the closed consumer to be logged", func() bool { return closedLines() > 0 })
	wait.Within(t, waitLimit, "the stage to subscribe again", func() bool { st := src.Stats(); return st.Replaced == 1 && st.Consumers == 1 })
	if n := closedLines(); n != 1 {
		t.Errorf("the closed consumer was logged %d times, want once", n)
	}
	if got := own.snapshot(); len(got) != 0 {
		t.Errorf("Options.Logger received %d records, want none: %v", len(got), got[0].text)
	}
	subscribed := 0
	for _, l := range stage.snapshot() {
		if l.msg == "pulsar consumer subscribed" {
			subscribed++
		}
	}
	if subscribed != 2 {
		t.Errorf("the stage's logger has %d lines for the consumers subscribed, want 2 (the first and its replacement)", subscribed)
	}
}

// A DLQ policy on a failover subscription can never fire (the broker keeps
// no redelivery counts there): the source says so once, at WARN, however
// many stages run; on a shared subscription it says nothing.
func TestDLQOnFailoverWarnedOnce(t *testing.T) {
	for _, typ := range []bpulsar.SubscriptionType{bpulsar.Failover, bpulsar.Shared} {
		t.Run(typ.String(), func(t *testing.T) {
			e := newEnv(t)
			want := e.publish("dlq-"+typ.String(), "m", 10)
			recs := newRecords()
			r := newReceived()
			co := earliest()
			co.DLQ = &pulsar.DLQPolicy{MaxDeliveries: 3, DeadLetterTopic: "dlq-" + typ.String() + "-dead"}
			src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"dlq-" + typ.String()}, Subscription: "sub",
				SubscriptionType: typ, Consumer: co})
			_, stop := start(t, pipeline.Options[[]byte, []byte]{
				Name:       "dlq",
				Logger:     slog.New(recs),
				Producer:   producer.Options[[]byte]{Source: src, Concurrency: 2},
				Processors: processor.Options[[]byte, []byte]{Handle: recordAll(r)},
			})
			wait.Within(t, waitLimit, "every message handled", func() bool { return r.distinct() == len(want) })
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, l := range recs.snapshot() {
				if l.level == slog.LevelWarn && strings.Contains(l.msg, "DLQ policy never fires") {
					n++
				}
			}
			if wantN := map[bpulsar.SubscriptionType]int{bpulsar.Failover: 1, bpulsar.Shared: 0}[typ]; n != wantN {
				t.Fatalf("%d warnings about the DLQ policy, want %d", n, wantN)
			}
		})
	}
}

// Guarantee: a source in a pipeline whose Logger is nil logs to
// slog.Default(), with its stage's name; nothing is silenced.
func TestNilLoggerLogsToTheDefault(t *testing.T) {
	lines := logtest.CaptureDefault(t)
	e := newEnv(t)
	co := earliest()
	co.DLQ = &pulsar.DLQPolicy{MaxDeliveries: 3, DeadLetterTopic: "default-log-dead"}
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"default-log"}, Subscription: "sub",
		SubscriptionType: bpulsar.Failover, Consumer: co})
	_, stop := start(t, pipeline.Options[[]byte, []byte]{
		Name:       "default-log",
		Producer:   producer.Options[[]byte]{Source: src},
		Processors: processor.Options[[]byte, []byte]{Handle: recordAll(newReceived())},
	})
	wait.Within(t, waitLimit, "the DLQ policy's warning on slog.Default()", func() bool {
		return lines.Count("level=WARN", "DLQ policy never fires", "stage=default-log.producer.0") == 1
	}, func() string { return strings.Join(lines.All(), "") })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// Guarantee: the outcomes that arrive for a consumer after it was replaced
// are one event: the source logs one line for them, however many
// acknowledgement calls bring them, and counts every one in
// Stats().DroppedAcks.
func TestDroppedOutcomesOfAReplacedConsumerLoggedOnce(t *testing.T) {
	const dropped = "outcomes for messages of a closed or replaced consumer are dropped; the broker redelivers them"
	e := newEnv(t)
	// More than the stage and its eight stuck processors can hold at once
	// (the chunks in hand and queued, whose fill depends on timing, and
	// the window): the broker must run out of permits before it runs out
	// of messages.
	want := e.publish("dropped-logs", "m", 500)
	recs := newRecords()
	r := newReceived()
	g := newGate()
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"dropped-logs"}, Subscription: "sub", Consumer: earliest()})
	start(t, pipeline.Options[[]byte, []byte]{
		Name:   "dropped-logs",
		Logger: slog.New(recs),
		Producer: producer.Options[[]byte]{Source: src, Flow: producer.Flow{Initial: 10},
			Restart: producer.Restart{Backoff: 20 * time.Millisecond}},
		// Eight processors hold a message each: their outcomes reach the
		// replaced consumer in several acknowledgement calls.
		Processors: processor.Options[[]byte, []byte]{Concurrency: 8, Handle: recordAfter(g, r)},
	})
	defer g.open() // before the stop, even when the test fails
	e.waitStarved(src, "dropped-logs", "sub", len(want))
	if !src.CloseConsumerForTest() {
		t.Fatal("no open consumer to close")
	}
	wait.Within(t, waitLimit, "the closed consumer to be replaced", func() bool { return src.Stats().Replaced == 1 })
	g.open()
	wait.Within(t, waitLimit, "every message handled", func() bool { return r.distinct() == len(want) })
	wait.Within(t, waitLimit, "the backlog to empty", func() bool { return e.broker.Backlog("dropped-logs", "sub") == 0 })
	lines := 0
	for _, l := range recs.snapshot() {
		if l.msg == dropped {
			lines++
		}
	}
	if n := src.Stats().DroppedAcks; n < 8 || lines != 1 {
		t.Errorf("%d outcomes dropped in %d lines, want at least 8 (one per processor) in one line", n, lines)
	}
}
