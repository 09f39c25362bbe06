package testbroker

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testsize"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// PulsarFaultCount is how many messages a Pulsar fault test publishes:
// BOULEVARD_PULSAR_FAULT_MESSAGES, or a few hundred (100 with -short).
func PulsarFaultCount(t testing.TB) int {
	return testsize.Count(t, "BOULEVARD_PULSAR_FAULT_MESSAGES", 100, 300)
}

// PulsarPublishTimeout bounds each publish of PublishThroughPulsarFaults:
// a publish whose receipt the broker withholds longer fails.
const PulsarPublishTimeout = 2 * time.Second

// PulsarFaultPatience bounds the Pulsar fault tests' waits for what must
// happen (a reconnection takes the client's backoff, up to a few seconds).
const PulsarFaultPatience = 30 * time.Second

// PublishThroughPulsarFaults publishes n values with publish, from four
// goroutines, each publish with a context of PulsarPublishTimeout, in
// four quarters, each under one fault of b: every connection dropped
// while the first quarter is published; the sends of the second withheld
// until one waits, then released; the sends of the third withheld until
// one waits, then their connections dropped unanswered (the client sends
// them again on its new connection); the sends of the fourth withheld
// until a publish's context ends, then their connections dropped. With
// the race detector (RaceDetector) no connection is dropped: the sends are
// withheld and released instead. It then checks against the messages
// stored on topic (decode reads a value from a payload) that every publish
// that returned nil is stored, that nothing stored was never published,
// and that publishes both failed and succeeded, and returns the ledger of
// the publishes.
func PublishThroughPulsarFaults(t testing.TB, b *pulsartest.Broker, topic string, n int, publish func(ctx context.Context, v int) error, decode func([]byte) (int, error)) *Ledger {
	t.Helper()
	led := NewLedger()
	bounded := func(v int) error {
		ctx, cancel := context.WithTimeout(context.Background(), PulsarPublishTimeout)
		defer cancel()
		return publish(ctx, v)
	}
	done := func() int { p, f := led.Counts(); return p + f }
	quarter := func(i int, fault func()) {
		var wg sync.WaitGroup
		wg.Go(func() { PublishRange(led, i*n/4, (i+1)*n/4, bounded, nil) })
		fault()
		wg.Wait()
	}
	withheld := func() {
		wait.Within(t, PulsarFaultPatience, "a send withheld", func() bool { return b.Stats().Withheld > 0 })
	}
	drop := b.DropConnections
	if RaceDetector {
		drop = func() {}
	}
	quarter(0, func() {
		wait.Within(t, FaultPatience(PulsarFaultPatience, n), "a few publishes", func() bool { return done() >= n/16 })
		drop()
	})
	withhold := func() func() {
		release := b.Withhold(pulsartest.CommandSend)
		t.Cleanup(release) // a test that fails midway lets the sends go
		return release
	}
	release := withhold()
	quarter(1, func() { withheld(); release() })
	release = withhold()
	quarter(2, func() { withheld(); drop(); release() })
	release = withhold()
	quarter(3, func() {
		wait.Within(t, PulsarFaultPatience, "a publish to fail while the broker withholds its receipt past its context", func() bool { _, f := led.Counts(); return f > 0 })
		drop()
		release()
	})
	stored := map[int]bool{}
	for _, m := range b.Messages(topic) {
		v, err := decode(m.Payload)
		if err != nil {
			t.Fatalf("message %v of %q: %v", m.ID, topic, err)
		}
		stored[v] = true
	}
	lost, unknown := led.Unstored(stored)
	if len(lost) > 0 {
		t.Errorf("%d publishes returned nil and their messages are not stored: %v", len(lost), lost)
	}
	if len(unknown) > 0 {
		t.Errorf("the topic holds values never published: %v", unknown)
	}
	published, failed := led.Counts()
	if failed == 0 || published < n/2 {
		t.Errorf("%d publishes returned nil and %d failed: want both outcomes", published, failed)
	}
	t.Logf("%d publishes returned nil, %d failed; %d messages stored", published, failed, len(stored))
	return led
}

// PulsarPublisher returns publish, or, with the race detector
// (RaceDetector), a function that publishes v's payload (encode) to topic
// through b's API instead, for a test that cuts the connections of the
// producer publish sends through.
func PulsarPublisher(b *pulsartest.Broker, topic string, encode func(v int) ([]byte, error), publish func(v int) error) func(v int) error {
	if !RaceDetector {
		return publish
	}
	return func(v int) error {
		payload, err := encode(v)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), PulsarFaultPatience)
		defer cancel()
		_, err = b.Publish(ctx, topic, pulsartest.Message{Payload: payload})
		return err
	}
}

// PulsarReopened waits, within PulsarFaultPatience, until b has as many
// consumers and producers open as it had when before was taken (b.Stats()
// before the fault): every client that lost its connections has opened
// them all again. A test that drops connections calls it before it ends:
// pulsar-client-go (v0.21.0) reconnects a producer on a goroutine that no
// Close waits for, and a client closed while that goroutine looks the
// topic up leaves the lookup retrying, for up to the client's operation
// timeout, after the test has ended.
func PulsarReopened(t testing.TB, b *pulsartest.Broker, before pulsartest.BrokerStats) {
	t.Helper()
	wait.Within(t, PulsarFaultPatience, "every consumer and producer to be open again", func() bool {
		st := b.Stats()
		return st.ConsumersOpen == before.ConsumersOpen && st.ProducersOpen == before.ProducersOpen
	}, func() string {
		st := b.Stats()
		return fmt.Sprintf("%d consumers and %d producers open, want %d and %d", st.ConsumersOpen, st.ProducersOpen, before.ConsumersOpen, before.ProducersOpen)
	})
}

// RacePulsarClose is RaceClose with closeFn called once n more consumers
// and producers are open on b than when it is called (at once for n 0),
// so that the calls it races are that far under way, or once every call
// has returned. t fails unless closeFn returns nil and leaves none open on
// b. It returns the calls' results, in the order they returned.
func RacePulsarClose[R any](t testing.TB, b *pulsartest.Broker, n int, calls []func() R, closeFn func() error) []R {
	t.Helper()
	before := pulsarOpen(b)
	under, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(under)
		for pulsarOpen(b) < before+n {
			select {
			case <-ended:
				return
			default:
				runtime.Gosched()
			}
		}
	}()
	results, err := RaceClose(under, calls, closeFn)
	close(ended)
	<-under
	if err != nil {
		t.Fatalf("a Close racing %d calls = %v, want nil", len(calls), err)
	}
	if open := pulsarOpen(b); open != 0 {
		t.Fatalf("once a Close racing %d calls returned, %d consumers and producers open, want none", len(calls), open)
	}
	return results
}

// pulsarOpen is the number of consumers and producers open on b.
func pulsarOpen(b *pulsartest.Broker) int {
	st := b.Stats()
	return st.ConsumersOpen + st.ProducersOpen
}
