package producer

import (
	"log/slog"

	"github.com/boulevard-go/boulevard/internal/release"
	"github.com/boulevard-go/boulevard/internal/sourcewire"
)

func init() {
	sourcewire.New = func(opts any, name string, log *slog.Logger, out any, rel *release.Signal) any {
		return opts.(wirer).wire(name, log, out, rel)
	}
}

// wirer is implemented by every Options[T]: it builds the runtime for T.
type wirer interface {
	wire(name string, log *slog.Logger, out any, rel *release.Signal) any
}

// wire builds the producer runtime of o for the pipeline named name, whose
// processors' input is out (an output[T]) and whose release signal is rel.
func (o Options[T]) wire(name string, log *slog.Logger, out any, rel *release.Signal) any {
	return newRuntime(o, runtimeConfig[T]{Name: name, Logger: log, Output: out.(output[T]), Release: rel})
}
