package pulsartopology_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/pulsarnack"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/pulsartopology"
)

// Guarantee: a letter on the main topic that fits under the broker's
// maxMessageSize only without the properties a hold or a dead-lettering
// adds (a message another producer wrote, which Publish's reserve did
// not check) fails its hold and its dead-lettering with an error wrapping
// pulsar.ErrMessageTooLarge that names the hold topic or the DLQ, the
// message's size and the broker's limit; it is neither lost nor
// acknowledged: the broker delivers it again, not before
// Options.RedeliveryDelay (less the client's nack precision).
func TestALetterTooLargeForItsHoldAndDLQIsNeitherLostNorRetriedHot(t *testing.T) {
	const limit = 16 << 10
	const delay = 600 * time.Millisecond
	br, err := pulsartest.Start(context.Background(), pulsartest.Options{Logger: testbroker.PulsarLogger(), MaxMessageSize: limit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = br.Close() })
	codec := topic.Codec[string](topic.StringCodec{})
	top := build(t, topology.New("oversize").Hold(time.Minute).DLQ())

	// Another producer: a backend whose MaxMessageSize is the default,
	// above the broker's, keeps no reserve under the broker's limit.
	other := newBackend(t, options(br, codec))
	oq, err := other.Declare(ctxT(t), top)
	if err != nil {
		t.Fatal(err)
	}
	big := letterOfSize(limit - 100)
	if err := oq.Publish(ctxT(t), big); err != nil {
		t.Fatalf("Publish of a %d-byte letter under a broker limit of %d = %v", limit-100, limit, err)
	}

	o := options(br, codec)
	o.MaxMessageSize, o.RedeliveryDelay = limit, delay
	be := newBackend(t, o)
	q, r := declared(t, be, top)
	dlqName, _ := top.DLQ()
	hold, dlq := be.TopicName(top.Holds()[0].Name), be.TopicName(dlqName)

	l := receiveOne(t, r)
	if l.Value != big.Value {
		t.Fatalf("received a letter of %d bytes, want the %d-byte one", len(l.Value), len(big.Value))
	}
	now := time.Now()
	l.Retries, l.FirstFailure, l.LastFailure = 1, now, now
	expect := func(what string, err error, full string) {
		t.Helper()
		if !errors.Is(err, pulsar.ErrMessageTooLarge) || !errors.Is(err, pulsartopology.ErrSend) {
			t.Fatalf("%s = %v, want it to wrap pulsar.ErrMessageTooLarge and ErrSend", what, err)
		}
		if text := err.Error(); !strings.Contains(text, strconv.Quote(full)) || !strings.Contains(text, "size: ") ||
			!strings.Contains(text, "MaxMessageSize: "+strconv.Itoa(limit)) {
			t.Fatalf("%s: %q, want it to name topic %q, the size and the limit %d", what, text, full, limit)
		}
	}
	expect("Hold", q.Hold(ctxT(t), 0, l), hold)
	l.Death = &topology.Death{Reason: topology.ReasonMaxRetries, Error: "failed", Topic: top.Name(), Group: top.ConsumerGroup(),
		Retries: 1, FirstFailure: now, LastFailure: now}
	expect("DeadLetter", q.DeadLetter(ctxT(t), l), dlq)
	settled := time.Now()
	if err := r.Settle(ctxT(t), &l); !errors.Is(err, pulsartopology.ErrNotSettled) {
		t.Fatalf("Settle of the letter whose hand-offs failed = %v, want ErrNotSettled", err)
	}
	again := receiveOne(t, r)
	// The client rounds a nack's deadline down to a multiple of 2^bit ms.
	least := delay - time.Duration(1<<*pulsarnack.Bit(delay))*time.Millisecond
	if waited := time.Since(settled); again.Value != big.Value || waited < least {
		t.Fatalf("delivered again after %v a letter of %d bytes, want the %d-byte one after at least %v", waited, len(again.Value), len(big.Value), least)
	}
}
