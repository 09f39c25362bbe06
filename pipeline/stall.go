package pipeline

import (
	"log/slog"
	"time"
)

// StallLog is the WARN line a stage logs when a call it holds (a
// processor's chunk of up to Processors.MaxDemand messages, a batch
// processor's batch) has run longer than Options.StallThreshold: one line
// per stall, however many of the stage's workers it holds and however
// long it lasts. The call is the whole chunk or batch, not one handler
// call: a chunk of healthy handler calls that together run past the
// threshold is logged too. Its attributes: stage; workers, how many of
// the stage's calls have run longer than the threshold; longest, how long
// the longest of them has run; threshold.
//
// A producer stage logs it too when its hand-over of delivered messages
// to the processors has run their PartitionBy longer than the threshold
// (producer.Stage.HandOffAge): PartitionBy runs on the source's
// goroutine or the stage's dispatching one, and while it blocks the
// source stops and the processors, idle, log nothing. That line has one
// more attribute, in="processors' PartitionBy"; workers is 1, a stage
// hands over one batch at a time. Waiting for room in the processors'
// queues is not part of the hand-over's time.
const StallLog = "chunk or batch running longer than the stall threshold"

// StallEndedLog is the INFO line a stage that logged StallLog logs once
// none of its calls has run longer than Options.StallThreshold any more.
// Its attributes: stage; took, how long the longest call of the stall ran
// (as the last reading before it ended saw it: short by up to
// Options.StallCheckInterval); workers, the most calls that had run
// longer than the threshold at once; and in, for a producer stage's
// hand-over, as StallLog has it.
const StallEndedLog = "stalled chunk or batch ended"

// stallWatch is what the stall watch knows of one stage.
type stallWatch struct {
	stage string
	// in names the user code a call runs, when the stage is not the one
	// whose handlers it calls (a producer stage's hand-over: the
	// processors' PartitionBy); empty otherwise.
	in string
	// ages appends how long each call of the stage has been running
	// (processing.Pool.CallAges, batching.Batcher.CallAges,
	// producer.Stage.HandOffAge).
	ages func(now time.Time, ages []time.Duration) []time.Duration
	// stalled: the stage logged StallLog and not StallEndedLog yet;
	// longest and workers are the stall's so far.
	stalled bool
	longest time.Duration
	workers int
}

// watchStalls reads every StallCheckInterval how long the calls of each
// stage have been running, which dates them for Stats (see
// Options.StallCheckInterval), and logs a stall's beginning and end. run
// starts it, unless StallCheckInterval is negative, and waits for it: it
// returns once the stages have returned, or when Stop and Run give up on
// them (giveUp waits for it).
//
// Its ticker runs while the stages are idle too: stopping it then would
// need a signal from the workers when a call begins, a store or a
// channel operation per chunk and per batch on the hot path, to save one
// wake-up per interval.
func (p *Pipeline[In, Out]) watchStalls() {
	defer close(p.stallsDone)
	watches := []stallWatch{{stage: p.proc.Name(), ages: p.proc.CallAges}}
	for _, b := range p.batchers {
		watches = append(watches, stallWatch{stage: b.StageName(), ages: b.CallAges})
	}
	if p.opts.Processors.PartitionBy != nil {
		// Without PartitionBy a hand-over runs no user code: its age stays 0.
		for _, s := range p.prod.Stages() {
			watches = append(watches, stallWatch{stage: s.Name(), in: "processors' PartitionBy",
				ages: func(now time.Time, ages []time.Duration) []time.Duration { return append(ages, s.HandOffAge(now)) }})
		}
	}
	threshold := p.opts.StallThreshold
	t := time.NewTicker(p.opts.StallCheckInterval)
	defer t.Stop()
	var ages []time.Duration
	for {
		select {
		case <-p.stagesDone:
			// No call runs any more.
			for i := range watches {
				watches[i].check(p.log, nil, threshold)
			}
			return
		case <-p.quitStalls:
			return
		case <-t.C:
		}
		now := time.Now()
		for i := range watches {
			w := &watches[i]
			ages = w.ages(now, ages[:0])
			w.check(p.log, ages, threshold)
		}
	}
}

// check logs the beginning of a stall of the stage, whose calls have been
// running for ages, or its end; nothing when threshold is negative.
func (w *stallWatch) check(log *slog.Logger, ages []time.Duration, threshold time.Duration) {
	if threshold < 0 {
		return
	}
	workers, longest := 0, time.Duration(0)
	for _, a := range ages {
		if a > threshold {
			workers++
			longest = max(longest, a)
		}
	}
	switch {
	case workers > 0:
		w.longest = max(w.longest, longest)
		w.workers = max(w.workers, workers)
		if !w.stalled {
			w.stalled = true
			attrs := []any{slog.String("stage", w.stage), slog.Int("workers", workers),
				slog.Duration("longest", longest.Round(time.Millisecond)), slog.Duration("threshold", threshold)}
			if w.in != "" {
				attrs = append(attrs, slog.String("in", w.in))
			}
			log.Warn(StallLog, attrs...)
		}
	case w.stalled:
		attrs := []any{slog.String("stage", w.stage),
			slog.Duration("took", w.longest.Round(time.Millisecond)), slog.Int("workers", w.workers)}
		if w.in != "" {
			attrs = append(attrs, slog.String("in", w.in))
		}
		log.Info(StallEndedLog, attrs...)
		*w = stallWatch{stage: w.stage, in: w.in, ages: w.ages}
	}
}
