//lint:file-ignore U1000 the message types' fields are there for their size and pointer layout, never read

package main

import (
	"fmt"
	"io"
	"sync"
)

// The msgsize workload measures how much a message's size alone costs
// the hand-written pipeline. It runs the processors-only pipeline (the
// procs workload's hand-written side) with three message types in every
// round, in rotating order:
//
//   - msg, the comparison's message, 32 bytes;
//   - msg64, 64 bytes;
//   - msgLikeBoulevard, with the size and pointer layout of Boulevard's
//     *message.Message[[]byte] (88 bytes, allocated from the 96-byte size
//     class).
//
// Only the message's type changes: every run does the procs workload's
// work. All three go through the same generic loop (runProcsOf), so they
// compare with each other; the procs workload's own hand-written side
// (runHand) is left as a user would write it.

// msg64 is a 64-byte message.
type msg64 struct {
	id   uint64
	data []byte
	ack  any
	pad  [2]uint64
}

// msgLikeBoulevard mirrors the fields of message.Message[[]byte]: the
// payload, the metadata and acknowledger interfaces, the id, the ack data
// interface and a word of flags.
type msgLikeBoulevard struct {
	data     []byte
	metadata any
	ack      any
	id       uint64
	aux      any
	flags    uint64
}

// sized is one message type of the msgsize workload.
type sized struct {
	name string
	run  runner
}

var sizes = []sized{
	{"32 B", procsOf(func(id uint64, d []byte) *msg { return &msg{id: id, data: d} }, func(m *msg) (uint64, []byte) { return m.id, m.data })},
	{"64 B", procsOf(func(id uint64, d []byte) *msg64 { return &msg64{id: id, data: d} }, func(m *msg64) (uint64, []byte) { return m.id, m.data })},
	{"88 B (as Boulevard's)", procsOf(func(id uint64, d []byte) *msgLikeBoulevard { return &msgLikeBoulevard{id: id, data: d} }, func(m *msgLikeBoulevard) (uint64, []byte) { return m.id, m.data })},
}

// procsOf returns a runner of the hand-written processors-only pipeline
// whose source allocates its messages with mk; fields reads a message.
func procsOf[M any](mk func(id uint64, data []byte) *M, fields func(*M) (uint64, []byte)) runner {
	return func(cfg config, recs records, t *tally) error {
		in := make(chan *M, chanCap)
		go func() {
			for i := range cfg.N {
				in <- mk(uint64(i), recs[i])
			}
			close(in)
		}()
		var procs sync.WaitGroup
		for range cfg.Processors {
			procs.Go(func() {
				for m := range in {
					id, data := fields(m)
					if check(data) != nil {
						t.failed.Add(1)
						continue
					}
					t.seen[id]++
				}
			})
		}
		procs.Wait()
		return nil
	}
}

// msgSizes runs every message type of sizes once a round, rounds times,
// and reports each one's median throughput and CPU a message.
func msgSizes(cfg config, recs records, rounds, warmup int, w io.Writer) error {
	res := make([][]sample, len(sizes))
	var t tally
	for _, s := range sizes {
		c := cfg
		c.N = min(warmup, cfg.N)
		if _, err := measure("warmup", s.run, c, recs, &t); err != nil {
			return err
		}
	}
	for r := range rounds {
		for i := range sizes {
			k := (i + r) % len(sizes)
			s, err := measure("hand", sizes[k].run, cfg, recs, &t)
			if err != nil {
				return fmt.Errorf("%s: %w", sizes[k].name, err)
			}
			res[k] = append(res[k], s)
		}
	}
	for k, s := range sizes {
		fmt.Fprintf(w, "msgsize hand-written, processors only, message %-22s %6.2f M/s (%4.0f cpu-ns/msg)\n", s.name+":", median(res[k], thr)/1e6, median(res[k], cpuNs))
	}
	return nil
}
