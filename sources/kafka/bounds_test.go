package kafka_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/validate"
)

// Guarantee: Config.Net.MaxOpenRequests, by which sarama sizes two
// channels per broker connection, is bounded: at MaxOpenRequests New
// accepts it, past it New refuses it with an error naming
// kafka.config.Net.MaxOpenRequests and its rule, before any connection,
// instead of sarama panicking ("makechan: size out of range") on its own
// goroutine when the source connects.
func TestNewRefusesMaxOpenRequestsPastItsBound(t *testing.T) {
	c := newCluster(t, 1)
	at := sourceOptions(c, "g-open-requests")
	at.Config.Net.MaxOpenRequests = kafka.MaxOpenRequests
	if err := at.WithDefaults().Validate(); err != nil {
		t.Fatalf("MaxOpenRequests at its bound refused: %v", err)
	}
	for _, n := range []int{kafka.MaxOpenRequests + 1, 1 << 62} {
		opts := sourceOptions(c, "g-open-requests")
		opts.Config.Net.MaxOpenRequests = n
		src, err := kafka.New(opts)
		if err == nil {
			// What a user does next: run it.
			p := startPipeline(t, pipelineOpts("open-requests", src, 1, newLedger(), nil))
			stopPipeline(t, p)
			t.Fatalf("MaxOpenRequests %d accepted by New", n)
		}
		var es validate.Errors
		if !errors.As(err, &es) || len(es) != 1 || !es.Has("kafka.config.Net.MaxOpenRequests", "lte") {
			t.Fatalf("MaxOpenRequests %d: New = %v, want one lte error on kafka.config.Net.MaxOpenRequests", n, err)
		}
		if want := fmt.Sprintf("kafka.config.Net.MaxOpenRequests must be ≤ %d", kafka.MaxOpenRequests); !strings.Contains(err.Error(), want) {
			t.Fatalf("MaxOpenRequests %d: error %q does not say %q", n, err, want)
		}
	}
}

// Guarantee: the final commit of a released partition is tried
// Config.Consumer.Offsets.Retry.Max+1 times whatever that field holds:
// with math.MaxInt (retry without a practical limit, within
// RevokeTimeout) a source that stops commits what it handled.
func TestFinalCommitHappensWithTheLargestOffsetRetryCount(t *testing.T) {
	commitAll(t, "g-retry-max", func(o *kafka.Options) {
		o.CommitInterval = time.Hour // only the final commit commits
		o.Config.Consumer.Offsets.Retry.Max = math.MaxInt
	})
}
