// Command mpworker is one process of the Kafka backend's multi-process
// test: a publisher or a balanced consumer of one topic on a Kafka
// cluster, reporting what it does on standard output, one line per event
// ("ready", "published <n>", "handled <n>", "acked <n>", "done").
//
//	mpworker -brokers 127.0.0.1:9092 -role consumer -group workers
//	mpworker -brokers 127.0.0.1:9092 -role publisher -from 1 -to 500
//
// A publisher publishes from..to, then reads one line from standard input
// and publishes the next -then values. A consumer acks what it handled in
// groups of -ack-every, and whatever it holds when no message came for a
// moment; it stops when its standard input closes.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
)

func main() {
	brokers := flag.String("brokers", "", "comma-separated bootstrap brokers")
	role := flag.String("role", "consumer", "publisher or consumer")
	name := flag.String("topic", "jobs", "topic name")
	group := flag.String("group", "workers", "consumer group")
	partitions := flag.Int("partitions", 3, "partitions")
	from := flag.Int("from", 1, "first value to publish")
	to := flag.Int("to", 100, "last value published before waiting for a line on standard input")
	then := flag.Int("then", 0, "values published after that line")
	capacity := flag.Int("capacity", 16, "balanced.queue_capacity (read-ahead)")
	ackEvery := flag.Int("ack-every", 10, "ack handled messages in groups of this many")
	flag.Parse()
	if err := run(*brokers, *role, *name, *group, int32(*partitions), *from, *to, *then, *capacity, *ackEvery); err != nil {
		fmt.Fprintln(os.Stderr, "mpworker:", err)
		os.Exit(1)
	}
}

// config is the tests' sarama configuration, under this command's client
// id.
func config() *sarama.Config {
	c := testbroker.SaramaConfig()
	c.ClientID = "boulevard-mp"
	return c
}

func run(brokers, role, name, group string, partitions int32, from, to, then, capacity, ackEvery int) error {
	b, err := kafkatopic.New(kafkatopic.Options[int]{
		Brokers:       strings.Split(brokers, ","),
		Config:        config(),
		Codec:         topic.IntCodec{},
		Partitions:    partitions,
		RevokeTimeout: time.Second,
		Logger:        slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	if err != nil {
		return err
	}
	defer func() { _ = b.Close(context.Background()) }()
	h, err := topic.NewTopic(topic.Name(name), topic.Options{Balanced: topic.BalancedPolicy{Capacity: capacity}}, topic.Backend[int](b))
	if err != nil {
		return err
	}
	defer h.Close()
	out := bufio.NewWriter(os.Stdout)
	say := func(format string, args ...any) {
		fmt.Fprintf(out, format+"\n", args...)
		_ = out.Flush()
	}
	if role == "publisher" {
		say("ready")
		publish := func(lo, hi int) error {
			for v := lo; v <= hi; v++ {
				if err := h.Publish(context.Background(), v); err != nil {
					return err
				}
				say("published %d", v)
			}
			return nil
		}
		if err := publish(from, to); err != nil {
			return err
		}
		if then > 0 {
			if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
				return err
			}
			if err := publish(to+1, to+then); err != nil {
				return err
			}
		}
		say("done")
		return nil
	}
	sub, err := h.Subscribe(context.Background(), topic.Balanced(topic.GroupName(group)), topic.SubscriberOptions{})
	if err != nil {
		return err
	}
	defer sub.Close()
	say("ready")
	ctx, cancel := context.WithCancel(context.Background())
	go func() { // standard input closing stops the consumer
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	var held []topic.Item[int]
	ack := func() {
		for _, it := range held {
			if err := sub.Ack(it.ID); err != nil {
				fmt.Fprintln(os.Stderr, "mpworker: ack:", err)
				continue
			}
			say("acked %d", it.Value)
		}
		held = held[:0]
	}
	for ctx.Err() == nil {
		rctx, rcancel := context.WithTimeout(ctx, 50*time.Millisecond)
		it, err := sub.Receive(rctx)
		rcancel()
		if errors.Is(err, context.DeadlineExceeded) {
			ack() // nothing came for a moment: settle what is held
			continue
		}
		if err != nil {
			break
		}
		say("handled %d", it.Value)
		held = append(held, it)
		if len(held) >= ackEvery {
			ack()
		}
	}
	ack()
	return nil
}
