package pulsar_test

import (
	"context"
	"log/slog"
	"sync"

	"github.com/boulevard-go/boulevard/internal/sourcewire"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
)

// producerOutput stands for the processors' input in tests that run the
// source without a pipeline.
type producerOutput interface {
	Publish(ctx context.Context, msgs []*message.Message[[]byte]) (int, error)
}

// producerRuntime is the part of the producer runtime those tests use.
type producerRuntime interface {
	Start(ctx context.Context, wg *sync.WaitGroup, fatal func(error))
	StopFetching()
	Close(ctx context.Context) error
}

// newProducerRuntime builds the producer stages that run a source outside a
// pipeline, feeding out, as the pipeline builds its own. opts are used as
// given: apply WithDefaults first unless the test wants them raw.
func newProducerRuntime(opts producer.Options[[]byte], name string, log *slog.Logger, out producerOutput) producerRuntime {
	return sourcewire.New(opts, name, log, out, nil).(producerRuntime)
}
