package kafkatopic

import (
	"context"

	"github.com/boulevard-go/boulevard/internal/kafkaconn"
)

// probe dials every bootstrap broker at once and asks each for its API
// versions (after TLS and SASL, when configured), each step bounded by
// Options.ConnectTimeout and by what is left until ctx's deadline. It
// returns nil if one answered, or an error wrapping ErrConnect naming
// every broker with its cause (credentials left out), which wraps
// ctx.Err() when ctx ended meanwhile (see kafkaconn.Probe).
func (b *Backend[T]) probe(ctx context.Context) error {
	return kafkaconn.Probe(ctx, ErrConnect, b.opts.Brokers, b.cfg, b.opts.ConnectTimeout, b.red.Err)
}
