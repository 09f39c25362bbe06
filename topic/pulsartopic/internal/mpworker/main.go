// Command mpworker is the program the multi-process test of package
// pulsartopic runs: a publisher, or a member of a balanced group, on a
// Pulsar topic made by the pulsartopic backend.
//
//	mpworker -url pulsar://127.0.0.1:6650 -topic t -role publish -n 1000
//	mpworker -url pulsar://127.0.0.1:6650 -topic t -role consume -group g
//
// A publisher publishes 0..n-1 and prints "published <n>". A consumer
// prints "ready" once subscribed, then for each message "handled <v>"
// before it acks it and "acked <v>" after; it leaves the group and exits
// when its standard input closes. With -stall-after k it hangs once it has
// handled its k-th message, without acking that one, until it is killed.
// Every line is written straight to
// standard output, so a process killed at any point has reported all it
// handled.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/pulsartopic"
)

func main() {
	url := flag.String("url", "", "service URL")
	name := flag.String("topic", "", "topic name")
	role := flag.String("role", "", "publish or consume")
	n := flag.Int("n", 0, "messages to publish")
	group := flag.String("group", "workers", "balanced group")
	capacity := flag.Int("capacity", 32, "balanced.queue_capacity: each member's read-ahead")
	stall := flag.Int("stall-after", 0, "if > 0, hang without acking the message after this many (to be killed)")
	flag.Parse()
	if err := run(*url, *name, *role, *n, *group, *capacity, *stall); err != nil {
		fmt.Fprintln(os.Stderr, "mpworker:", err)
		os.Exit(1)
	}
}

func run(url, name, role string, n int, group string, capacity, stall int) error {
	be, err := pulsartopic.New(pulsartopic.Options[int]{
		ServiceURL: url, Codec: topic.IntCodec{}, SendTimeout: -1,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	defer be.Close(context.Background())
	h, err := topic.NewTopic[int](topic.Name(name), topic.Options{Balanced: topic.BalancedPolicy{Capacity: capacity}}, be)
	if err != nil {
		return err
	}
	defer h.Close()
	ctx := context.Background()
	if role == "publish" {
		for v := range n {
			if err := h.Publish(ctx, v); err != nil {
				return fmt.Errorf("publish %d: %w", v, err)
			}
		}
		fmt.Fprintf(os.Stdout, "published %d\n", n)
		return nil
	}
	sub, err := h.Subscribe(ctx, topic.Balanced(topic.GroupName(group)), topic.SubscriberOptions{})
	if err != nil {
		return err
	}
	defer sub.Close()
	ctx, cancel := context.WithCancel(ctx)
	go func() { // standard input closing asks the member to leave
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	fmt.Fprintln(os.Stdout, "ready")
	for {
		it, err := sub.Receive(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		fmt.Fprintf(os.Stdout, "handled %d\n", it.Value)
		if stall > 0 {
			if stall--; stall == 0 {
				<-ctx.Done() // hang with the message unacked until killed
				return nil
			}
		}
		if err := sub.Ack(it.ID); err != nil {
			return fmt.Errorf("ack %d: %w", it.Value, err)
		}
		fmt.Fprintf(os.Stdout, "acked %d\n", it.Value)
	}
}
