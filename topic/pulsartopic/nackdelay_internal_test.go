package pulsartopic

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: a nacked message waits for Options.NackRedeliveryDelay (less
// the client's rounding, at most the delay's largest power of two below
// it) before it comes back, even for delays under the client's default
// nack precision of 256ms, which would round their deadlines into the
// past and bring the messages back at once.
func TestNackedMessageWaitsForAShortRedeliveryDelay(t *testing.T) {
	const delay = 100 * time.Millisecond
	const floor = delay - 64*time.Millisecond // 2^6 ms: the precision within 100ms
	_, _, st, ss := balancedOnBroker(t, topic.IntCodec{}, delay)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := st.Publish(ctx, topic.Envelope[int]{Value: 7}, topic.Block); err != nil {
		t.Fatal(err)
	}
	dst := make([]topic.Envelope[int], 1)
	receive := func(what string) topic.Envelope[int] {
		t.Helper()
		got, err := ss.Receive(ctx, dst)
		if err != nil || got != 1 || dst[0].Value != 7 {
			t.Fatalf("%s: Receive = %d %+v, %v; want the one message", what, got, dst[0], err)
		}
		return dst[0]
	}
	// Each round nacks the message and times its return. The client's
	// rounding depends on the millisecond of the nack, so rounds fall at
	// different phases; with 256ms precision about three nacks in four
	// come back within a tick (a third of the delay).
	e := receive("first delivery")
	const rounds = 10
	for i := range rounds {
		nacked := time.Now()
		if err := ss.Settle(e.ID, errors.New("failed")); err != nil {
			t.Fatal(err)
		}
		e = receive("redelivery")
		if took := time.Since(nacked); took < floor {
			t.Fatalf("round %d: the nacked message came back after %v, before its delay %v less the precision (%v)", i, took, delay, floor)
		}
	}
	if err := ss.Settle(e.ID, nil); err != nil {
		t.Fatal(err)
	}
}

// Guarantee: each delivery of a message carries how many deliveries to the
// subscription came before it without an ack (the broker's redelivery
// count), so that a subscriber can give up on a message that keeps
// failing; a first delivery carries 0.
func TestNackedMessageCarriesTheBrokersRedeliveryCount(t *testing.T) {
	_, _, st, ss := balancedOnBroker(t, topic.IntCodec{}, 50*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := st.Publish(ctx, topic.Envelope[int]{Value: 7}, topic.Block); err != nil {
		t.Fatal(err)
	}
	dst := make([]topic.Envelope[int], 1)
	for want := uint32(0); want <= 3; want++ {
		got, err := ss.Receive(ctx, dst)
		if err != nil || got != 1 || dst[0].Value != 7 || dst[0].Redeliveries != want {
			t.Fatalf("delivery %d: Receive = %d %+v, %v; want 7 with Redeliveries %d", want+1, got, dst[0], err, want)
		}
		var reason error
		if want < 3 {
			reason = errors.New("failed")
		}
		if err := ss.Settle(dst[0].ID, reason); err != nil {
			t.Fatal(err)
		}
	}
}
