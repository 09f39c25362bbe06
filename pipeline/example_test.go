package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// A pipeline with a source, processors that parse text into numbers, and a
// batcher that sums them per parity. Run returns once the source is
// exhausted and every message is acknowledged.
func Example() {
	inputs := []string{"1", "2", "three", "4", "5", "6"}
	acks := acker.NewRecorder(false)

	// A source that delivers its inputs within the permits it is granted:
	// it takes them from its feed with Acquire (the pull model) before it
	// delivers that many.
	source := producer.SourceFunc[string](func(ctx context.Context, stage *producer.Stage[string]) error {
		feed := stage.NewFeed("inputs", nil)
		for i := 0; i < len(inputs); {
			n, err := feed.Acquire(ctx, len(inputs)-i)
			if err != nil {
				return nil // the pipeline is stopping
			}
			for ; n > 0; n-- {
				feed.Deliver(message.New(inputs[i], acks, uint64(i)))
				i++
			}
		}
		return nil // exhausted
	})

	p, err := pipeline.New(pipeline.Options[string, int]{
		Name:     "sums",
		Producer: producer.Options[string]{Source: source, Flow: producer.Flow{Initial: 4, Threshold: 2, Refill: 2}},
		Processors: processor.Options[string, int]{
			Concurrency: 1,
			Handle: func(_ context.Context, m *message.Message[string]) (int, error) {
				n, err := strconv.Atoi(m.Data)
				if err != nil {
					return 0, fmt.Errorf("not a number: %q", m.Data)
				}
				m.SetBatchKey(map[bool]string{true: "even", false: "odd"}[n%2 == 0])
				return n, nil
			},
		},
		Batchers: []batcher.Options[int]{{
			Name:         "default",
			BatchSize:    10,
			BatchTimeout: time.Hour,
			Handle: func(_ context.Context, batch []*message.Message[int], info message.BatchInfo) error {
				sum := 0
				for _, m := range batch {
					sum += m.Data
				}
				fmt.Printf("%s: %d numbers, sum %d (%s)\n", info.BatchKey, info.Size, sum, info.Trigger)
				return nil
			},
		}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := p.Run(context.Background()); err != nil {
		fmt.Println(err)
	}
	for _, o := range acks.Failed() {
		fmt.Printf("message %d failed: %v\n", o.ID, o.Err)
	}
	fmt.Printf("%d acknowledged, %d failed\n", acks.Total(), acks.FailedCount())
	// Unordered output:
	// odd: 2 numbers, sum 6 (flush)
	// even: 3 numbers, sum 12 (flush)
	// message 2 failed: not a number: "three"
	// 6 acknowledged, 1 failed
}

// Test pushes messages into a running pipeline and waits for their
// outcomes, like Broadway's test_message.
func ExamplePipeline_Test() {
	p, err := pipeline.New(pipeline.Options[string, string]{
		Name: "upper",
		Processors: processor.Options[string, string]{
			Handle: func(_ context.Context, m *message.Message[string]) (string, error) {
				if m.Data == "" {
					return "", errors.New("empty input")
				}
				return strings.ToUpper(m.Data), nil
			},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	if err := p.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer p.Stop(ctx)

	outcomes, err := p.Test(ctx, "hello", "", "world")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, o := range outcomes {
		fmt.Printf("%q err=%v\n", o.Data, o.Err)
	}
	// Output:
	// "HELLO" err=<nil>
	// "" err=empty input
	// "WORLD" err=<nil>
}

// New reports every invalid option at once, naming the field and the rule.
func ExampleNew_validation() {
	_, err := pipeline.New(pipeline.Options[int, int]{
		Name:     "broken",
		Producer: producer.Options[int]{Flow: producer.Flow{Initial: 10, Threshold: 20}},
		Processors: processor.Options[int, int]{
			Concurrency: -1,
		},
	})
	fmt.Println(err)
	// Output:
	// invalid options: producer.flow.threshold must be < initial; processors.concurrency must be ≥ 1; processors.handle is required
}

// Push feeds a pipeline from user code, for example an HTTP handler, with
// messages that carry their own acknowledger.
func ExamplePipeline_Push() {
	p, err := pipeline.New(pipeline.Options[string, string]{
		Name: "ingest",
		Processors: processor.Options[string, string]{
			Concurrency: 1,
			Handle: func(_ context.Context, m *message.Message[string]) (string, error) {
				return strings.TrimSpace(m.Data), nil
			},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	if err := p.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	// The acknowledger learns each message's outcome; here it prints it.
	done := acker.Func(func(_ context.Context, ok, failed []acker.Outcome) {
		for _, o := range ok {
			fmt.Printf("request %d handled: %q\n", o.ID, o.Message.(*message.Message[string]).Data)
		}
	})
	if err := p.Push(ctx, message.New("  hello  ", &done, 1)); err != nil {
		fmt.Println(err)
	}
	// Stop drains: the pushed message is handled and acknowledged first.
	if err := p.Stop(ctx); err != nil {
		fmt.Println(err)
	}
	// Output:
	// request 1 handled: "hello"
}

// Stop drains within bounds: past ShutdownTimeout the handlers' contexts
// are cancelled, a message whose handler gives up then is interrupted (its
// source delivers it again), and Stop reports ErrShutdownTimeout.
func ExamplePipeline_Stop() {
	started := make(chan struct{})
	p, err := pipeline.New(pipeline.Options[string, string]{
		Name:            "slow",
		Logger:          slog.New(slog.DiscardHandler),
		ShutdownTimeout: 100 * time.Millisecond,
		Processors: processor.Options[string, string]{
			Handle: func(ctx context.Context, m *message.Message[string]) (string, error) {
				close(started)
				<-ctx.Done() // a call that takes longer than the drain may
				return "", ctx.Err()
			},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	if err := p.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	acks := acker.NewRecorder(false)
	if err := p.Push(ctx, message.New("order-1", acks, 1)); err != nil {
		fmt.Println(err)
	}
	<-started

	// A deadline for Stop itself, as a process stopping on SIGTERM has.
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err = p.Stop(stopCtx)
	fmt.Println("shutdown timeout:", errors.Is(err, pipeline.ErrShutdownTimeout))
	for _, o := range acks.Failed() {
		fmt.Printf("message %d: interrupted %t, disposition %v\n",
			o.ID, errors.Is(o.Err, acker.ErrShutdown), o.Disposition)
	}
	// Output:
	// shutdown timeout: true
	// message 1: interrupted true, disposition retry
}
