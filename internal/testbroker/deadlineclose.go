package testbroker

import (
	"context"
	"time"

	"github.com/boulevard-go/boulevard/producer"
)

// CloseDeadline is the deadline a DeadlineClose gives its source's Close,
// and CloseMargin how much past it and the source's documented grace a
// test lets that Close return: room for a machine that stalls the test
// process for a second or more, still below one backoff of a client
// whose test sets its backoffs to ten seconds.
const (
	CloseDeadline = 300 * time.Millisecond
	CloseMargin   = 4 * time.Second
)

// DeadlineClose is a source whose Close runs with a context of
// CloseDeadline, whatever the pipeline gives it, and sends how long it
// took on Took.
type DeadlineClose[T any] struct {
	producer.Source[T]
	Took chan time.Duration
}

// ClosingByDeadline returns src as a DeadlineClose.
func ClosingByDeadline[T any](src producer.Source[T]) DeadlineClose[T] {
	return DeadlineClose[T]{src, make(chan time.Duration, 1)}
}

// Close closes the source with a context of CloseDeadline.
func (s DeadlineClose[T]) Close(context.Context) error {
	ctx, cancel := context.WithTimeout(context.Background(), CloseDeadline)
	defer cancel()
	start := time.Now()
	err := s.Source.Close(ctx)
	s.Took <- time.Since(start)
	return err
}
