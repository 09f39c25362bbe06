package main

import (
	"context"
	"strconv"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/producer/sourcetest"
)

// The order generator passes the source conformance suite. It has no
// broker: its acknowledger is the record of outcomes, every source of a
// fixture is the same generator (so a second pipeline continues where the
// first left off), and the orders are made up as they are fetched.
func TestConformance(t *testing.T) {
	sourcetest.Run(t, sourcetest.Harness[[]byte]{
		Known: map[string]string{
			"InterruptedIsRedelivered": "the generator makes each order once and has no broker to deliver one again; its record counts every outcome, the interrupted ones too",
		},
		Start: func(t testing.TB, n int) sourcetest.Fixture[[]byte] {
			rec := acker.NewRecorder(false)
			gen := newOrderSource(n, []string{"acme", "globex"}, 1, rec)
			fail := &sourcetest.Failing[[]byte]{}
			src := fail.Wrap(gen)
			return sourcetest.Fixture[[]byte]{
				NewSource: func() (producer.Source[[]byte], error) { return src, nil },
				Publish: func(context.Context) ([]string, error) {
					keys := make([]string, n)
					for i := range keys {
						keys[i] = strconv.Itoa(i)
					}
					return keys, nil
				},
				Key: func(m *message.Message[[]byte]) string {
					_, id, _ := m.Acknowledger()
					return strconv.FormatUint(id, 10)
				},
				Settled: func(context.Context) (int, error) { return rec.Total(), nil },
				Fail:    fail.Fail,
				Fetched: func(context.Context) (int, error) {
					total, _ := gen.Generated()
					return total, nil
				},
			}
		},
	})
}
