package pulsar_test

import (
	"context"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// Guarantee: Close returns by its context's deadline (300ms, far below the
// client's operation timeout of a minute), with an error wrapping
// context.DeadlineExceeded, while the broker holds its answer to a
// command of the running source: the lookup, partitioned-topic lookup or
// subscribe of a consumer being subscribed, the acks of a consumer that
// asks for ack receipts, a consumer's permits (FLOW) or its negative
// acknowledgements (REDELIVER_UNACKNOWLEDGED_MESSAGES). What is still
// closing is left to the background.
func TestCloseReturnsByItsDeadlineWhileTheBrokerHoldsACommand(t *testing.T) {
	for _, c := range []struct {
		cmd pulsartest.Command
		// subscribing holds cmd from the start, while the consumer is
		// subscribed; otherwise once a message was handled.
		subscribing bool
		receipts    bool
		fail        bool
	}{
		{cmd: pulsartest.CommandLookup, subscribing: true},
		{cmd: pulsartest.CommandPartitionedMetadata, subscribing: true},
		{cmd: pulsartest.CommandSubscribe, subscribing: true},
		{cmd: pulsartest.CommandAck, receipts: true},
		{cmd: pulsartest.CommandFlow},
		{cmd: pulsartest.CommandRedeliver, fail: true},
	} {
		t.Run(c.cmd.String(), func(t *testing.T) {
			e := newEnv(t)
			cl := e.patientClient()
			e.publish("held", "m", 50)
			opts := earliest()
			opts.AckWithResponse = c.receipts
			opts.NackRedeliveryDelay = 50 * time.Millisecond
			src := bpulsar.New(bpulsar.Options{Client: cl, Topics: []string{"held"}, Subscription: "sub", Consumer: opts})
			r := newReceived()
			handle := func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
				r.add(m)
				if c.fail {
					return nil, context.Canceled
				}
				return m.Data, nil
			}
			release := func() {}
			if c.subscribing {
				release = e.broker.Withhold(c.cmd)
			}
			run(t, src, 1, producer.Flow{Initial: 4, Refill: 2}, handle)
			if !c.subscribing {
				wait.Within(t, waitLimit, "a message handled", func() bool { return r.distinct() > 0 })
				release = e.broker.Withhold(c.cmd)
			}
			t.Cleanup(release) // before the pipeline stops
			wait.Within(t, waitLimit, c.cmd.String()+" withheld", func() bool { return e.broker.Stats().Withheld > 0 })
			testbroker.ClosesByDeadline(t, "Close with "+c.cmd.String()+" withheld", src.Close)
		})
	}
}
