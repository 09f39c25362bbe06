package kafka_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/wait"
)

// logCapture is a slog handler that keeps the messages it is given.
type logCapture struct {
	mu   *sync.Mutex
	msgs *[]string
}

func (h logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (h logCapture) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	*h.msgs = append(*h.msgs, r.Message)
	h.mu.Unlock()
	return nil
}
func (h logCapture) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h logCapture) WithGroup(string) slog.Handler      { return h }

func (h logCapture) has(msg string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range *h.msgs {
		if m == msg {
			return true
		}
	}
	return false
}

// Guarantee: the source owns Consumer.Return.Errors: consumer errors reach
// the source's Logger even when the user's Config turned them off, and the
// source recovers from them.
func TestConsumerErrorsLogged(t *testing.T) {
	const parts = 1
	group := "g-errors"
	c := newCluster(t, parts)
	ends := produce(t, c, parts, 0, 20)
	faults := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: testTopic, Err: kerr.KafkaStorageError, Count: 2})
	defer faults.Remove()
	logs := logCapture{mu: &sync.Mutex{}, msgs: &[]string{}}
	opts := sourceOptions(c, group)
	opts.Config.Consumer.Return.Errors = false
	opts.Logger = slog.New(logs)
	l := newLedger()
	p := startPipeline(t, pipelineOpts("errors", newSource(t, opts), 1, l, nil))
	wait.Within(t, 20*time.Second, "every record despite fetch errors", func() bool { return l.covers(ends) })
	wait.Within(t, 10*time.Second, "the fetch error logged by the source", func() bool { return logs.has("kafka consumer error") })
	stopPipeline(t, p)
	if faults.Hits() == 0 {
		t.Fatal("the fetch fault was not exercised")
	}
}
