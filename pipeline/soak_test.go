package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/testsize"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// soakRounds is how many random pipelines TestSoakRandomPipelines builds: a
// few by default, more with BOULEVARD_SOAK_ROUNDS=N.
func soakRounds(t *testing.T) int {
	return testsize.Count(t, "BOULEVARD_SOAK_ROUNDS", 2, 6)
}

// handledSet records which messages a stage handled.
type handledSet struct {
	mu  sync.Mutex
	ids map[uint64]bool
}

func (h *handledSet) add(id uint64) {
	h.mu.Lock()
	if h.ids == nil {
		h.ids = map[uint64]bool{}
	}
	h.ids[id] = true
	h.mu.Unlock()
}

func (h *handledSet) has(id uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ids[id]
}

// Guarantee: whatever the shape of the pipeline (concurrency, partitioning,
// batchers, failures, panics) and however it is stopped, no message is
// acknowledged twice, none is acknowledged as successful without having been
// handled by every stage it was routed through, and a drain that finishes in
// time acknowledges every message the source delivered.
func TestSoakRandomPipelines(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("BOULEVARD_SOAK_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (set BOULEVARD_SOAK_SEED to replay)", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for round := range soakRounds(t) {
		cfg := soakConfig{
			producers:   1 + rng.IntN(3),
			feeds:       1 + rng.IntN(3),
			perFeed:     rng.IntN(400), // 0 = until stopped
			processors:  1 + rng.IntN(4),
			maxDemand:   1 + rng.IntN(20),
			partitioned: rng.IntN(2) == 0,
			batchers:    rng.IntN(3),
			batchSize:   1 + rng.IntN(60),
			timeout:     time.Duration(1+rng.IntN(20)) * time.Millisecond,
			batchConc:   1 + rng.IntN(3),
			batchPart:   rng.IntN(2) == 0,
			stopAfter:   time.Duration(rng.IntN(30)) * time.Millisecond,
			tight:       rng.IntN(4) == 0,
			flow:        producer.Flow{Initial: 2 + rng.IntN(50), Refill: 1 + rng.IntN(30)},
		}
		cfg.flow.Threshold = 1 + rng.IntN(cfg.flow.Initial-1)
		t.Run(fmt.Sprintf("round%d", round), func(t *testing.T) {
			t.Logf("%+v", cfg)
			soakOnce(t, cfg)
		})
	}
}

type soakConfig struct {
	producers, feeds, perFeed int
	processors, maxDemand     int
	partitioned               bool
	batchers, batchSize       int
	timeout                   time.Duration
	batchConc                 int
	batchPart                 bool
	stopAfter                 time.Duration
	tight                     bool // a shutdown timeout too short to finish
	flow                      producer.Flow
}

func soakOnce(t *testing.T, cfg soakConfig) {
	rec := acker.NewRecorder(false)
	src := &gridSource{feeds: cfg.feeds, perFeed: cfg.perFeed, ack: rec}
	var processed, batched handledSet
	key := func(id uint64) string { return strconv.FormatUint(id%7, 10) }
	o := pipeline.Options[uint64, uint64]{
		Name:            "soak",
		ShutdownTimeout: 10 * time.Second,
		Producer:        producer.Options[uint64]{Source: src, Concurrency: cfg.producers, Flow: cfg.flow},
		Processors: processor.Options[uint64, uint64]{
			Concurrency: cfg.processors,
			MaxDemand:   cfg.maxDemand,
			Handle: func(ctx context.Context, m *message.Message[uint64]) (uint64, error) {
				id := m.Data
				switch id % 31 {
				case 3:
					return 0, errors.New("handler error")
				case 5:
					panic("handler panic")
				case 7:
					if cfg.tight {
						// Slow enough that a tight timeout catches some.
						select {
						case <-time.After(time.Millisecond):
						case <-ctx.Done():
							return 0, ctx.Err()
						}
					}
				}
				processed.add(id)
				m.SetBatchKey(key(id))
				if cfg.batchers == 2 && id%2 == 1 {
					m.SetBatcher("second")
				}
				return id, nil
			},
		},
	}
	if cfg.tight {
		o.ShutdownTimeout = time.Millisecond
	}
	if cfg.partitioned {
		o.Processors.PartitionBy = func(m *message.Message[uint64]) string { return key(m.Data) }
	}
	batchHandle := func(_ context.Context, b []*message.Message[uint64], info message.BatchInfo) error {
		for _, m := range b {
			if m.BatchKey() != info.BatchKey {
				panic("batch mixes keys")
			}
			if m.Data%29 == 0 {
				m.Fail(errors.New("batch item failed"))
				continue
			}
			batched.add(m.Data)
		}
		return nil
	}
	for i, name := range []string{"default", "second"}[:cfg.batchers] {
		bo := batcher.Options[uint64]{Name: name, BatchSize: cfg.batchSize, BatchTimeout: cfg.timeout, Concurrency: cfg.batchConc, Handle: batchHandle}
		if cfg.batchPart && i == 0 {
			bo.PartitionBy = func(m *message.Message[uint64]) string { return m.BatchKey() }
		}
		o.Batchers = append(o.Batchers, bo)
	}
	p := mustNew(t, o)
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if cfg.perFeed == 0 || cfg.stopAfter < 10*time.Millisecond {
		time.Sleep(cfg.stopAfter)
		err := p.Stop(ctxT(t, 30*time.Second))
		if err != nil && !(cfg.tight && errors.Is(err, pipeline.ErrShutdownTimeout)) {
			t.Fatalf("Stop: %v", err)
		}
	} else {
		select {
		case <-p.Done():
		case <-time.After(30 * time.Second):
			t.Fatal("pipeline with an exhausted source did not stop by itself")
		}
		if err := p.Err(); err != nil {
			t.Fatalf("Err: %v", err)
		}
	}

	delivered := 0
	for _, r := range src.records() {
		delivered += r.delivered
	}
	for id, n := range rec.Counts() {
		if n != 1 {
			t.Fatalf("message %x acknowledged %d times", id, n)
		}
	}
	for _, o := range rec.Successful() {
		if !processed.has(o.ID) {
			t.Fatalf("message %x acknowledged as successful without being processed", o.ID)
		}
		if cfg.batchers > 0 && !batched.has(o.ID) {
			t.Fatalf("message %x acknowledged as successful without its batch handler", o.ID)
		}
	}
	for _, o := range rec.Failed() {
		if o.Err == nil {
			t.Fatalf("failed outcome for %x has no error", o.ID)
		}
	}
	if p.Err() == nil && rec.Total() != delivered {
		t.Fatalf("a completed drain acknowledged %d of %d delivered messages", rec.Total(), delivered)
	}
	if rec.Total() > delivered {
		t.Fatalf("acknowledged %d messages, only %d were delivered", rec.Total(), delivered)
	}
}
