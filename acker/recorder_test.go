package acker_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/boulevard-go/boulevard/acker"
)

// Guarantee: a Recorder made with keepMessages true hands back the
// outcomes' Message; one made with false clears it, so that a test does not
// hold messages their source may reuse.
func TestRecorderKeepsMessagesOnlyWhenAskedTo(t *testing.T) {
	msg := new(int)
	for _, keep := range []bool{false, true} {
		r := acker.NewRecorder(keep)
		r.Ack(context.Background(), []acker.Outcome{{ID: 1, Message: msg}}, []acker.Outcome{{ID: 2, Err: context.Canceled, Message: msg}})
		for _, o := range append(r.Successful(), r.Failed()...) {
			if kept := o.Message != nil; kept != keep {
				t.Errorf("NewRecorder(%v): outcome %d has Message %v", keep, o.ID, o.Message)
			}
		}
	}
}

// Guarantee: Wait, blocked on fewer outcomes than it waits for, returns as
// soon as later Ack calls bring the count up to n.
func TestRecorderWaitReturnsWhenLaterAcksArrive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := acker.NewRecorder(false)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- r.Wait(ctx, 2) }()
		synctest.Wait() // Wait is blocked
		r.Ack(ctx, []acker.Outcome{{ID: 1}}, nil)
		r.Ack(ctx, []acker.Outcome{{ID: 2}}, nil)
		synctest.Wait()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Wait = %v after 2 outcomes, want nil", err)
			}
		default:
			t.Fatal("Wait still blocked after 2 outcomes were recorded")
		}
	})
}
