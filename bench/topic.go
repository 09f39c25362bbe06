package main

// The topic-hop workload (flag -topic): the same messages and work as the
// plain workload, split over two pipelines joined by an internal topic.
//
// Boulevard: pipeline A (the compare source → processors whose handler is a
// topic/sink publishing each payload) → balanced in-memory topic
// (queue_capacity 1024 or -hopcap, on_full block) → pipeline B (a topic source,
// topic/source, in group "b" → processors applying transform → batcher →
// batch processor summing). With -topic disabled the topic has
// ack_propagation disabled: A acknowledges each message once its processor
// handed it to the topic, B's acks on the subscription are no-ops. With
// -topic auto it has ack_propagation auto (max_in_flight 1024 or -inflight,
// timeout 30s):
// the sink publishes tracked and defers A's messages, and A's source is
// acked, one call per message, when B's batch processor has handled and
// acked the message downstream. A drains the sink (pipeline.Options.Drainers)
// so that it does not close its source before every outcome has come back.
//
// Hand-written: source goroutine → chan (in) → processor goroutines → one
// buffered channel of the topic's capacity → processor goroutines
// (transform) → chan (out) → batcher goroutine → batch chan →
// batch-processor goroutine. With -topic disabled the hop carries the
// payload value; A's processors take up to MaxDemand messages at a time, as
// Boulevard's processors do, and acknowledge them with one call once they
// are in the hop channel. With -topic auto the hop carries the message
// itself, with its acknowledger (the ack callback of the hand-written side),
// and the batch processor calls it once per message after handling the
// batch.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/sink"
	"github.com/boulevard-go/boulevard/topic/source"
)

// topicMode selects the workload: no topic, or the topic hop with ack
// propagation disabled or auto.
type topicMode int

const (
	topicNone topicMode = iota
	topicDisabled
	topicAuto
)

func (m topicMode) String() string {
	switch m {
	case topicDisabled:
		return "disabled"
	case topicAuto:
		return "auto"
	default:
		return "none"
	}
}

// parseTopicModes parses the -topic flag: "" or "none", "disabled", "auto",
// or "both" (disabled, then auto).
func parseTopicModes(s string) ([]topicMode, error) {
	switch s {
	case "", "none":
		return []topicMode{topicNone}, nil
	case "disabled":
		return []topicMode{topicDisabled}, nil
	case "auto":
		return []topicMode{topicAuto}, nil
	case "both":
		return []topicMode{topicDisabled, topicAuto}, nil
	}
	return nil, fmt.Errorf("-topic %q: want none, disabled, auto or both", s)
}

// handHopCap is the capacity of the hand-written hop channel: the topic's
// balanced queue capacity.
func (c config) handHopCap() int { return c.topicOptions(c.Topic).Balanced.Capacity }

// topicOptions are the options of the Boulevard side's topic for mode, with
// defaults applied.
func (c config) topicOptions(mode topicMode) topic.Options {
	var o topic.Options
	o.Balanced.Capacity = c.HopCap
	o.AckPropagation.MaxInFlight = c.MaxInFlight
	if mode == topicAuto {
		o.AckPropagation.Mode = topic.PropagationAuto
	}
	return o.WithDefaults()
}

// hopStats is what a Boulevard topic run saw of its topic.
type hopStats struct {
	// Published is the topic's count of successful publishes.
	Published uint64
	// Received is the number of messages the topic source handed to B.
	Received uint64
	// NotTracked is the number of B's acks the topic answered "not
	// tracked" (every one with propagation disabled).
	NotTracked uint64
	// Acked and Failed are the outcomes the sink reported upstream (auto).
	Acked, Failed uint64
}

// bothStopTimeout bounds the stop of the pipelines of a run that failed.
const bothStopTimeout = 30 * time.Second

// runBoulevardTopic runs the topic-hop workload on Boulevard.
func runBoulevardTopic(cfg config, t *tally) (err error) {
	ctx := context.Background()
	auto := cfg.Topic == topicAuto
	h, err := topic.NewTopic[uint64]("compare", cfg.topicOptions(cfg.Topic), nil)
	if err != nil {
		return err
	}
	defer h.Close()
	o := h.Options()
	snk, err := sink.New(sink.Options[uint64]{Binding: topic.Binding[uint64]{
		Handle: h, OnFull: o.Balanced.OnFull, AckPropagation: o.AckPropagation,
	}})
	if err != nil {
		return err
	}
	defer snk.Close()
	// Subscribed here, before A publishes: a topic does not replay.
	tsrc, err := source.New(source.Options[uint64]{Topic: h, Mode: topic.Balanced("b")})
	if err != nil {
		return err
	}
	defer tsrc.Close(ctx)

	b, err := pipeline.New(batchingOptions("compare-b", tsrc, cfg, t))
	if err != nil {
		return err
	}

	src := &blvdSource{n: cfg.N, ack: &blvdAcker{t: t}}
	if cfg.Prealloc {
		src.slab = t.blvdSlab[:cfg.N]
	}
	var drainers []pipeline.Drainer
	if auto {
		// A must not close its source before B's outcomes came back.
		drainers = []pipeline.Drainer{snk}
	}
	a, err := pipeline.New(pipeline.Options[uint64, uint64]{
		Name:     "compare-a",
		Drainers: drainers,
		Producer: producer.Options[uint64]{Source: src, Flow: cfg.flow()},
		Processors: processor.Options[uint64, uint64]{
			Concurrency: cfg.Processors,
			MaxDemand:   cfg.demand(),
			Handle:      snk.Handler(),
		},
	})
	if err != nil {
		return err
	}
	// Whatever happens, no goroutine of the run outlives it: upstream first.
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, bothStopTimeout)
		defer cancel()
		err = errors.Join(err, a.Stop(sctx), b.Stop(sctx))
		ts, ss, st := tsrc.Stats(), snk.Stats(), h.Stats()
		t.hop = hopStats{Published: st.Published, Received: ts.Received, NotTracked: ts.NotTracked,
			Acked: ss.Acked, Failed: ss.Failed}
	}()

	if err := b.Start(ctx); err != nil {
		return err
	}
	if !auto {
		// A is done once every message is in the topic; closing the topic
		// then ends B's source after B has received everything, and B
		// drains and stops by itself.
		if err := a.Run(ctx); err != nil {
			return fmt.Errorf("pipeline A: %w", err)
		}
		h.Close()
		<-b.Done()
		return b.Err()
	}

	// auto: closing the topic would settle what B has not acked yet as
	// TopicClosed, so B is stopped (drained: its last partial batch is
	// flushed and acked) once it has received every message, and A, whose
	// guarded source waits for the outcomes, stops after that.
	if err := a.Start(ctx); err != nil {
		return err
	}
	// (A may also finish first: the source counts a batch only after
	// delivering it, and with N a multiple of the batch size B acks the
	// last batch without a stop; A's Err says whether it finished well.)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
wait:
	for tsrc.Stats().Received < uint64(cfg.N) {
		select {
		case <-tick.C:
		case <-a.Done():
			break wait
		case <-b.Done():
			return fmt.Errorf("pipeline B stopped before receiving every message: %v", b.Err())
		}
	}
	if err := b.Stop(ctx); err != nil {
		return fmt.Errorf("pipeline B: %w", err)
	}
	<-a.Done()
	if err := a.Err(); err != nil {
		return fmt.Errorf("pipeline A: %w", err)
	}
	return nil
}

// runHandTopic runs the topic-hop workload on the hand-written side.
func runHandTopic(cfg config, t *tally) error {
	ack := &handTally{t: t}
	var slab []handMsg
	if cfg.Prealloc {
		slab = t.handSlab[:cfg.N]
	}
	in := make(chan *handMsg, cfg.handInCap())
	go handSource(cfg, slab, ack, in)
	if cfg.Topic == topicAuto {
		handHopTracked(cfg, t, in)
	} else {
		handHopUntracked(cfg, t, in, ack)
	}
	return nil
}

// handHopUntracked: the hop carries payload values; A's processors
// acknowledge what they handed over, in chunks of up to MaxDemand.
func handHopUntracked(cfg config, t *tally, in <-chan *handMsg, ack handAcker) {
	hop := make(chan uint64, cfg.handHopCap())
	runStage(cfg.Processors, func() {
		chunk := make([]*handMsg, 0, cfg.demand())
		for {
			m, ok := <-in
			if !ok {
				return
			}
			chunk = append(chunk[:0], m)
		fill:
			for len(chunk) < cfg.demand() {
				select {
				case m, ok := <-in:
					if !ok {
						break fill
					}
					chunk = append(chunk, m)
				default:
					break fill
				}
			}
			for _, m := range chunk {
				hop <- m.data
			}
			ack.Ack(chunk)
			clear(chunk)
		}
	}, func() { close(hop) })

	out := make(chan uint64, cfg.handOutCap())
	runStage(cfg.Processors, func() {
		for v := range hop {
			out <- transform(v)
		}
	}, func() { close(out) })

	batches := make(chan []uint64, cfg.handBatchCap())
	go handBatcher(cfg, out, batches)
	for batch := range batches {
		var s uint64
		for _, v := range batch {
			s += v
		}
		t.handled(s, len(batch))
	}
}

// handHopTracked: the hop carries the message with its acknowledger, which
// the batch processor calls for each message once its batch is handled.
func handHopTracked(cfg config, t *tally, in <-chan *handMsg) {
	hop := make(chan *handMsg, cfg.handHopCap())
	runStage(cfg.Processors, func() {
		for m := range in {
			hop <- m
		}
	}, func() { close(hop) })

	out := make(chan *handMsg, cfg.handOutCap())
	runStage(cfg.Processors, func() {
		for m := range hop {
			m.data = transform(m.data)
			out <- m
		}
	}, func() { close(out) })

	batches := make(chan []*handMsg, cfg.handBatchCap())
	go handBatcher(cfg, out, batches)
	for batch := range batches {
		var s uint64
		for _, m := range batch {
			s += m.data
		}
		t.handled(s, len(batch))
		for i, m := range batch {
			m.ack.Ack(batch[i : i+1])
		}
	}
}

// runStage starts n goroutines running work and one that runs after when
// they have all returned (closing the stage's output). The stage ends by
// closing its input; whoever drains the output waits for it.
func runStage(n int, work, after func()) {
	done := make(chan struct{}, n)
	for range n {
		go func() {
			defer func() { done <- struct{}{} }()
			work()
		}()
	}
	go func() {
		for range n {
			<-done
		}
		after()
	}()
}

// handBatcher groups out into batches of BatchSize, emitting a partial batch
// Timeout after its first message or when out is closed, then closes
// batches. It is the hand-written batcher of runHand for any element type.
func handBatcher[E any](cfg config, out <-chan E, batches chan<- []E) {
	defer close(batches)
	batch := make([]E, 0, cfg.BatchSize)
	timer := time.NewTimer(cfg.Timeout)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case m, ok := <-out:
			if !ok {
				if len(batch) > 0 {
					batches <- batch
				}
				return
			}
			if len(batch) == 0 {
				timer.Reset(cfg.Timeout)
			}
			batch = append(batch, m)
			if len(batch) == cfg.BatchSize {
				timer.Stop()
				batches <- batch
				batch = make([]E, 0, cfg.BatchSize)
			}
		case <-timer.C:
			if len(batch) > 0 {
				batches <- batch
				batch = make([]E, 0, cfg.BatchSize)
			}
		}
	}
}
