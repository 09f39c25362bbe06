package queue_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/boulevard-go/boulevard/internal/queue"
)

func ExampleQueue() {
	ctx := context.Background()
	q := queue.New[string](8)

	// Publish blocks only while the queue is full.
	for _, s := range []string{"a", "b", "c"} {
		if err := q.Publish(ctx, s); err != nil {
			fmt.Println("publish:", err)
		}
	}

	// Receive takes everything that is queued, up to len(buf), in one call.
	buf := make([]string, 16)
	n, err := q.Receive(ctx, buf)
	fmt.Println(buf[:n], err)

	// After Close, publishing fails and receivers get the items still
	// queued, then ErrDrained.
	_ = q.Publish(ctx, "d")
	q.Close()
	fmt.Println(q.Publish(ctx, "e"))
	n, err = q.Receive(ctx, buf)
	fmt.Println(buf[:n], err)
	n, err = q.Receive(ctx, buf)
	fmt.Println(n, err, errors.Is(err, queue.ErrDrained))

	// Output:
	// [a b c] <nil>
	// topic: closed
	// [d] <nil>
	// 0 topic: subscription closed true
}
