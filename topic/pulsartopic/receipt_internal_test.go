package pulsartopic

import (
	"context"
	"errors"
	"testing"

	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: a publish whose receipt came before the topic's producer
// closed reports that receipt, not ErrTopicClosed: Close waits for the
// receipts of the sends already made before it closes the producer, so a
// publish that returned ErrTopicClosed then would have had its message
// stored all the same, against Publish's promise (nil and stored, or
// ErrTopicClosed and not stored).
func TestAReceiptThatCameBeforeTheProducerClosedIsThePublishsOutcome(t *testing.T) {
	tp := &pTopic[int]{producerClosed: make(chan struct{})}
	close(tp.producerClosed)
	for i := range 200 { // the waits are ready together: any order would show
		s := &send{done: make(chan error, 1)}
		s.done <- nil
		if received, err := tp.receipt(context.Background(), s, nil); !received || err != nil {
			t.Fatalf("try %d: a stored publish's receipt ready as the producer closed = %v, %v; want true, nil", i, received, err)
		}
	}
	// Without a receipt, the closed producer ends the wait.
	s := &send{done: make(chan error, 1)}
	if received, err := tp.receipt(context.Background(), s, nil); received || !errors.Is(err, topic.ErrTopicClosed) {
		t.Fatalf("a publish without a receipt as the producer closed = %v, %v; want false, ErrTopicClosed", received, err)
	}
}
