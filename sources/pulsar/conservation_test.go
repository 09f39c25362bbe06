package pulsar_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
)

// Guarantee: on a bad day (a third of the messages failing on their first
// delivery, some of the others failing with DispositionDiscard, the
// consumer closed under its stage halfway so that the stage restarts with
// a new one) the source's Stats count every delivery once: Received is the
// number of messages the handler was given, across the restart, the
// outcomes acked, nacked or dropped never exceed the deliveries and, once
// the backlog is empty, add up to them exactly, and no counter read in
// between goes down.
func TestStatsCountEachDeliveryOnceThroughFailuresAndAConsumerReplaced(t *testing.T) {
	const n = 400
	e := newEnv(t)
	e.publish("badday", "m", n)
	var handled, discarded atomic.Int64
	var mu sync.Mutex
	seen := map[string]bool{}
	co := earliest()
	co.NackRedeliveryDelay = 20 * time.Millisecond
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"badday"}, Subscription: "sub", Consumer: co, Logger: testLogger()})
	halfway := make(chan struct{})
	var once sync.Once
	_, stop := start(t, pipeline.Options[[]byte, []byte]{
		Name:     "badday",
		Logger:   testLogger(),
		Producer: producer.Options[[]byte]{Source: src, Restart: producer.Restart{Backoff: 20 * time.Millisecond}},
		Processors: processor.Options[[]byte, []byte]{Concurrency: 2, Handle: func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
			if handled.Add(1) == n/2 {
				once.Do(func() { close(halfway) })
			}
			mu.Lock()
			first := !seen[string(m.Data)]
			seen[string(m.Data)] = true
			mu.Unlock()
			if first && byteSum(m.Data)%3 == 0 {
				return nil, errors.New("fails the first time")
			}
			if byteSum(m.Data)%5 == 0 {
				discarded.Add(1)
				m.SetDisposition(acker.DispositionDiscard)
				return nil, errors.New("discarded")
			}
			return m.Data, nil
		}},
	})
	var last bpulsar.Stats
	read := func(when string) bpulsar.Stats {
		t.Helper()
		st := src.Stats()
		if st.Received < last.Received || st.Acked < last.Acked || st.Nacked < last.Nacked || st.Redelivered < last.Redelivered || st.DroppedAcks < last.DroppedAcks || st.Replaced < last.Replaced {
			t.Fatalf("%s: counters went down: %+v after %+v", when, st, last)
		}
		if st.Acked+st.Nacked+st.DroppedAcks > st.Received {
			t.Fatalf("%s: %d acked, %d nacked and %d dropped of %d received: %+v", when, st.Acked, st.Nacked, st.DroppedAcks, st.Received, st)
		}
		last = st
		return st
	}
	<-halfway
	read("halfway")
	if !src.CloseConsumerForTest() {
		t.Fatal("no open consumer to close")
	}
	wait.Within(t, waitLimit, "the stage to replace its consumer", func() bool { return read("restarting").Replaced == 1 })
	wait.Within(t, waitLimit, "the backlog to empty", func() bool { read("draining"); return e.broker.Backlog("badday", "sub") == 0 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	st := read("once stopped")
	mu.Lock()
	defer mu.Unlock()
	if st.Received != handled.Load() || len(seen) != n || st.Nacked == 0 || discarded.Load() == 0 {
		t.Errorf("stats %+v: the handler was given %d messages, %d distinct, %d discarded; want them all received, the %d published handled, some nacked, some discarded", st, handled.Load(), len(seen), discarded.Load(), n)
	}
	// Every message the broker no longer holds was acked; nothing was in
	// flight or interrupted once the backlog emptied.
	if sum := st.Acked + st.Nacked + st.DroppedAcks; sum != st.Received || st.Acked < n {
		t.Errorf("stats %+v: %d acked + %d nacked + %d dropped = %d, want the %d received, with the %d published acked at least once", st, st.Acked, st.Nacked, st.DroppedAcks, sum, st.Received, n)
	}
}

// byteSum is the sum of b's bytes.
func byteSum(b []byte) int {
	s := 0
	for _, c := range b {
		s += int(c)
	}
	return s
}
