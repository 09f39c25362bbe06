package producer

import (
	"log/slog"

	"github.com/boulevard-go/boulevard/internal/sourcewire"
)

func init() {
	sourcewire.New = func(opts any, name string, log *slog.Logger, out any) any {
		return opts.(wirer).wire(name, log, out)
	}
}

// wirer is implemented by every Options[T]: it builds the runtime for T.
type wirer interface {
	wire(name string, log *slog.Logger, out any) any
}

// wire builds the producer runtime of o for the pipeline named name, whose
// processors' input is out (an output[T]).
func (o Options[T]) wire(name string, log *slog.Logger, out any) any {
	return newRuntime(o, runtimeConfig[T]{Name: name, Logger: log, Output: out.(output[T])})
}
