package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// latencyConfig is the latency workload: a steady offered rate, batches of
// BatchSize with a Timeout, and the time from the source handing a message
// over to the batch handler seeing it.
//
// Both sides share the pacer below: the source wakes, computes how many
// messages are due since the start at Rate, stamps them all with one clock
// reading, hands them over, and sleeps until the next one is due. Each
// message carries its stamp as payload; the batch handler reads the clock
// once per batch and records now − stamp for every message of the batch.
// The hand-written batcher here has the timeout the workload asks for (a
// timer armed by a batch's first message), as Boulevard's has.
type latencyConfig struct {
	Rate       int
	Duration   time.Duration
	Processors int
	BatchSize  int
	Timeout    time.Duration
	Demand     int
	Window     int // Boulevard's producer.Flow.Initial; 0: its default
}

func (c latencyConfig) n() int { return int(int64(c.Rate) * int64(c.Duration) / int64(time.Second)) }

// pacer hands out the messages due at the offered rate.
type pacer struct {
	rate  int
	n     int
	start time.Time
	sent  int
}

// next waits until at least one message is due and returns how many are
// (at most max) and their stamp (nanoseconds since the start); 0 when all
// n have been handed out.
func (p *pacer) next(max int) (int, int64) {
	if p.sent >= p.n {
		return 0, 0
	}
	for {
		now := time.Since(p.start)
		due := min(int(int64(now)*int64(p.rate)/int64(time.Second))+1, p.n)
		if k := due - p.sent; k > 0 {
			k = min(k, max)
			p.sent += k
			return k, int64(now)
		}
		next := time.Duration(int64(p.sent) * int64(time.Second) / int64(p.rate))
		time.Sleep(next - now)
	}
}

// latencies records each message's delivery-to-batch-handler time.
type latencies struct {
	start time.Time
	d     []int64
	mu    sync.Mutex
	count int
}

func (l *latencies) record(ids []uint64, stamps []int64) {
	now := int64(time.Since(l.start))
	l.mu.Lock()
	for i, id := range ids {
		l.d[id] = now - stamps[i]
	}
	l.count += len(ids)
	l.mu.Unlock()
}

func (l *latencies) quantile(q float64) time.Duration {
	s := slices.Clone(l.d)
	slices.Sort(s)
	return time.Duration(s[min(len(s)-1, int(q*float64(len(s))))])
}

type stampedMsg struct {
	id uint64
	ts int64
}

func latencyHand(c latencyConfig, l *latencies) {
	in := make(chan *stampedMsg, chanCap)
	go func() {
		p := pacer{rate: c.Rate, n: c.n(), start: l.start}
		id := uint64(0)
		for {
			k, ts := p.next(64)
			if k == 0 {
				break
			}
			for range k {
				in <- &stampedMsg{id: id, ts: ts}
				id++
			}
		}
		close(in)
	}()
	out := make(chan *stampedMsg, chanCap)
	var procs sync.WaitGroup
	for range c.Processors {
		procs.Go(func() {
			for m := range in {
				out <- m
			}
		})
	}
	go func() {
		procs.Wait()
		close(out)
	}()
	batch := make([]*stampedMsg, 0, c.BatchSize)
	ids := make([]uint64, 0, c.BatchSize)
	stamps := make([]int64, 0, c.BatchSize)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	handle := func() {
		for _, m := range batch {
			ids = append(ids, m.id)
			stamps = append(stamps, m.ts)
		}
		l.record(ids, stamps)
		ids, stamps = ids[:0], stamps[:0]
		clear(batch)
		batch = batch[:0]
	}
	for {
		select {
		case m, ok := <-out:
			if !ok {
				handle()
				return
			}
			batch = append(batch, m)
			if len(batch) == 1 {
				timer.Reset(c.Timeout)
			}
			if len(batch) == c.BatchSize {
				timer.Stop()
				handle()
			}
		case <-timer.C:
			handle()
		}
	}
}

type latencySource struct {
	producer.Basic
	c latencyConfig
	l *latencies
}

func (s *latencySource) Run(ctx context.Context, st *producer.Stage[int64]) error {
	feed := st.NewFeed("latency", nil)
	p := pacer{rate: s.c.Rate, n: s.c.n(), start: s.l.start}
	buf := make([]*message.Message[int64], 0, 64)
	id := uint64(0)
	for {
		k, ts := p.next(64)
		if k == 0 {
			return nil
		}
		for k > 0 {
			got, err := feed.Acquire(ctx, k)
			if err != nil {
				return nil
			}
			for range got {
				buf = append(buf, message.New(ts, nil, id))
				id++
			}
			feed.Deliver(buf...)
			clear(buf)
			buf = buf[:0]
			k -= got
		}
	}
}

func latencyBoulevard(c latencyConfig, l *latencies) error {
	p, err := pipeline.New(latencyOptions(c, l))
	if err != nil {
		return err
	}
	return p.Run(context.Background())
}

// latencyOptions is Boulevard's side of the latency workload: a source
// offering the configured rate, processors that pass the stamp on, and one
// batcher whose handler records every message's latency.
func latencyOptions(c latencyConfig, l *latencies) pipeline.Options[int64, int64] {
	return pipeline.Options[int64, int64]{
		Name:     "latency",
		Logger:   quiet,
		Producer: producer.Options[int64]{Source: &latencySource{c: c, l: l}, Flow: producer.Flow{Initial: c.Window}},
		Processors: processor.Options[int64, int64]{
			Concurrency: c.Processors,
			MaxDemand:   c.Demand,
			Handle: func(_ context.Context, m *message.Message[int64]) (int64, error) {
				return m.Data, nil
			},
		},
		Batchers: []batcher.Options[int64]{{
			Name:         message.DefaultBatcher,
			BatchSize:    c.BatchSize,
			BatchTimeout: c.Timeout,
			Handle: func() func(context.Context, []*message.Message[int64], message.BatchInfo) error {
				ids := make([]uint64, 0, c.BatchSize)
				stamps := make([]int64, 0, c.BatchSize)
				return func(_ context.Context, batch []*message.Message[int64], _ message.BatchInfo) error {
					for _, m := range batch {
						_, id, _ := m.Acknowledger()
						ids = append(ids, id)
						stamps = append(stamps, m.Data)
					}
					l.record(ids, stamps)
					ids, stamps = ids[:0], stamps[:0]
					return nil
				}
			}(),
		}},
	}
}

// latencyRun is one run's quantiles.
type latencyRun struct{ p50, p99 time.Duration }

func runLatency(side string, c latencyConfig) (latencyRun, error) {
	l := &latencies{d: make([]int64, c.n())}
	for i := range l.d {
		l.d[i] = -1
	}
	l.start = time.Now()
	var err error
	if side == "boulevard" {
		err = latencyBoulevard(c, l)
	} else {
		latencyHand(c, l)
	}
	if err != nil {
		return latencyRun{}, err
	}
	if l.count != c.n() || slices.Contains(l.d, -1) {
		return latencyRun{}, fmt.Errorf("%s: %d of %d messages reached the batch handler", side, l.count, c.n())
	}
	return latencyRun{p50: l.quantile(0.50), p99: l.quantile(0.99)}, nil
}

// latencyPairs runs both sides rounds times, alternating which goes first,
// and prints each round and the medians of the per-round ratios.
func latencyPairs(c latencyConfig, rounds int, w io.Writer) error {
	var r50, r99 []float64
	var b50, b99, h50, h99 []float64
	for r := range rounds {
		order := []string{"boulevard", "hand"}
		if r%2 == 1 {
			order = []string{"hand", "boulevard"}
		}
		res := map[string]latencyRun{}
		for _, side := range order {
			lr, err := runLatency(side, c)
			if err != nil {
				return err
			}
			res[side] = lr
		}
		b, h := res["boulevard"], res["hand"]
		r50 = append(r50, float64(b.p50)/float64(h.p50))
		r99 = append(r99, float64(b.p99)/float64(h.p99))
		b50, b99 = append(b50, float64(b.p50)), append(b99, float64(b.p99))
		h50, h99 = append(h50, float64(h.p50)), append(h99, float64(h.p99))
		fmt.Fprintf(w, "latency round %2d  boulevard p50 %8s p99 %8s | hand p50 %8s p99 %8s | ratio p50 %.2f p99 %.2f\n",
			r+1, b.p50.Round(time.Microsecond), b.p99.Round(time.Microsecond), h.p50.Round(time.Microsecond), h.p99.Round(time.Microsecond),
			r50[len(r50)-1], r99[len(r99)-1])
	}
	us := func(v []float64) time.Duration { return time.Duration(median(v, ident)).Round(time.Microsecond) }
	fmt.Fprintf(w, "latency %d msg/s, batch %d, timeout %s, %d rounds of %s: boulevard p50 %s p99 %s, hand p50 %s p99 %s; ratio medians p50 %.2f p99 %.2f\n",
		c.Rate, c.BatchSize, c.Timeout, rounds, c.Duration, us(b50), us(b99), us(h50), us(h99), median(r50, ident), median(r99, ident))
	return nil
}
