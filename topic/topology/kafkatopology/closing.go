package kafkatopology

import (
	"context"
	"fmt"

	"github.com/boulevard-go/boulevard/internal/liveset"
)

// await waits for done, a reader's or the backend's closing (started with
// a liveset.Closing, on a goroutine of its own, because sarama's requests,
// a final commit or a leave, wait for the broker's answer up to
// Net.ReadTimeout), until ctx ends: it then calls cut (a kafkaconn.Set's
// Cut, at once or later), so that the closing fails its requests and ends
// soon after, and returns an error wrapping ctx.Err() that names what was
// closing.
func await(ctx context.Context, done <-chan struct{}, cut func(), what string) error {
	if err := liveset.Await(ctx, done, cut); err != nil {
		return fmt.Errorf("kafkatopology: closing %s: %w", what, err)
	}
	return nil
}
