package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Order is one order to settle.
type Order struct {
	ID     int
	Amount int // cents; negative is malformed
}

// Entry is one ledger entry of an account.
type Entry struct {
	Account string
	Seq     int
	Amount  int // cents; an entry below -100 overdraws the account
}

var (
	errGatewayDown = errors.New("payment gateway unavailable")
	errMalformed   = errors.New("malformed order: negative amount")
	errOverdraft   = errors.New("overdraft")
)

// journal records what happened, for the report.
type journal struct {
	mu    sync.Mutex
	lines map[string][]string
}

func (j *journal) add(who, what string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.lines == nil {
		j.lines = map[string][]string{}
	}
	j.lines[who] = append(j.lines[who], what)
}

func (j *journal) get(who string) []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.lines[who]...)
}

// run settles the orders and the ledger and reports to w; obs, when not
// nil, gets every pipeline and every topology source (the -http flag
// serves it), each source under its topology's name ("ledger-dlq" for the
// dead source reading the ledger's DLQ).
func run(ctx context.Context, w io.Writer, log *slog.Logger, obs *observe.Observer) error {
	orders, err := topology.New("order-settlement").Hold(time.Second).Hold(2 * time.Second).DLQ().Build()
	if err != nil {
		return err
	}
	ledger, err := topology.New("ledger").Sequenced(topology.FailAll).RoutingShards(4).DLQ().Build()
	if err != nil {
		return err
	}
	mem, err := topology.NewMemory[Order](topology.MemoryOptions{})
	if err != nil {
		return err
	}
	// The in-memory backend's Close never waits: the context only has to
	// outlive a cancellation of ctx, after which the backend still closes.
	defer mem.Close(context.WithoutCancel(ctx))
	lmem, err := topology.NewMemory[Entry](topology.MemoryOptions{})
	if err != nil {
		return err
	}
	defer lmem.Close(context.WithoutCancel(ctx))
	// Declaring is idempotent: a service declares its topologies on every
	// start.
	oq, err := mem.Declare(ctx, orders)
	if err != nil {
		return err
	}
	lq, err := lmem.Declare(ctx, ledger)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "queues: %s\n", strings.Join(append(orders.Names(), ledger.Names()...), ", "))

	j := &journal{}
	var fixed atomic.Bool // the operator's fix for malformed orders
	// The gateway fails every order's first two attempts when its ID is a
	// multiple of 3: those orders wait 1s in the first hold queue, then 2s
	// in the second.
	settle := func(ctx context.Context, m *message.Message[Order]) (Order, error) {
		o := m.Data
		d, _ := topology.DeliveryOf(m)
		who := fmt.Sprintf("order %d", o.ID)
		switch {
		case o.Amount < 0 && !fixed.Load():
			j.add(who, "rejected")
			return o, topology.Reject(errMalformed)
		case o.ID%3 == 0 && d.Retries < 2:
			j.add(who, fmt.Sprintf("gateway down (retry %d → %s)", d.Retries+1, orders.Holds()[min(d.Retries, 1)].Name))
			return o, topology.Retry(errGatewayDown)
		}
		j.add(who, fmt.Sprintf("settled after %d retries", d.Retries))
		return o, nil
	}
	osrc, err := topology.NewSource(topology.SourceOptions[Order]{Queues: oq, MaxRetries: 5, Logger: log})
	if err != nil {
		return err
	}
	op, err := start(ctx, "orders", orders.Names()[0], osrc, processor.Handler[Order, Order](topology.WithTimeout(time.Second, settle)), log, obs)
	if err != nil {
		return err
	}
	defer op.Stop(context.WithoutCancel(ctx))

	post := func(_ context.Context, m *message.Message[Entry]) (Entry, error) {
		e := m.Data
		who := "account " + e.Account
		if e.Amount < -100 {
			j.add(who, fmt.Sprintf("#%d rejected", e.Seq))
			return e, topology.Reject(errOverdraft)
		}
		j.add(who, fmt.Sprintf("#%d posted", e.Seq))
		return e, nil
	}
	lsrc, err := topology.NewSource(topology.SourceOptions[Entry]{Queues: lq, Logger: log})
	if err != nil {
		return err
	}
	lp, err := start(ctx, "ledger", ledger.Names()[0], lsrc, post, log, obs)
	if err != nil {
		return err
	}
	defer lp.Stop(context.WithoutCancel(ctx))

	opub, err := topology.NewPublisher(oq, topology.PublisherOptions[Order]{})
	if err != nil {
		return err
	}
	for id := 1; id <= 7; id++ {
		amount := 1000 * id
		if id == 5 {
			amount = -1
		}
		if err := opub.Publish(ctx, Order{ID: id, Amount: amount}); err != nil {
			return err
		}
	}
	lpub, err := topology.NewPublisher(lq, topology.PublisherOptions[Entry]{Key: func(e Entry) string { return e.Account }})
	if err != nil {
		return err
	}
	for _, e := range []Entry{
		{"A", 1, 500}, {"B", 1, 200}, {"A", 2, -900}, {"B", 2, -50}, {"A", 3, 100}, {"B", 3, 75}, {"A", 4, 20},
	} {
		if err := lpub.Publish(ctx, e); err != nil {
			return err
		}
	}
	if err := until(ctx, func() bool {
		o, l := osrc.Stats(), lsrc.Stats()
		return o.Acked == 6 && o.DeadLettered == 1 && l.Acked == 4 && l.DeadLettered == 3
	}); err != nil {
		o, l := osrc.Stats(), lsrc.Stats()
		return fmt.Errorf("waiting for the orders and the ledger to settle (orders: %d of 6 settled, %d of 1 dead-lettered; ledger: %d of 4 posted, %d of 3 dead-lettered): %w",
			o.Acked, o.DeadLettered, l.Acked, l.DeadLettered, err)
	}
	for id := 1; id <= 7; id++ {
		who := fmt.Sprintf("order %d", id)
		fmt.Fprintf(w, "%s: %s\n", who, strings.Join(j.get(who), "; "))
	}
	for _, a := range []string{"A", "B"} {
		who := "account " + a
		fmt.Fprintf(w, "%s: %s\n", who, strings.Join(j.get(who), ", "))
	}

	// The operator reads the ledger's DLQ through a pipeline.
	var dead []string
	var deadMu sync.Mutex
	dsrc, err := topology.NewDeadSource(topology.SourceOptions[Entry]{Queues: lq, Logger: log})
	if err != nil {
		return err
	}
	dp, err := start(ctx, "ledger-dlq", ledger.Names()[1], dsrc, topology.HandleDead(func(_ context.Context, e Entry, d topology.Death) (Entry, error) {
		deadMu.Lock()
		dead = append(dead, fmt.Sprintf("  %s #%d: %s (%s)", e.Account, e.Seq, d.Reason, d.Error))
		deadMu.Unlock()
		return e, nil
	}), log, obs)
	if err != nil {
		return err
	}
	if err := until(ctx, func() bool { return dsrc.Stats().Acked == 3 }); err != nil {
		return fmt.Errorf("reading the ledger's DLQ (%d of 3 read): %w", dsrc.Stats().Acked, err)
	}
	if err := dp.Stop(ctx); err != nil {
		return err
	}
	sort.Strings(dead)
	fmt.Fprintf(w, "%s holds:\n%s\n", ledger.Names()[1], strings.Join(dead, "\n"))

	// The operator looks at the dead orders, fixes the bug, and replays.
	dry, err := topology.Replay(ctx, oq, topology.ReplayOptions[Order]{DryRun: true})
	if err != nil {
		return err
	}
	for _, l := range dry.Replayed {
		fmt.Fprintf(w, "%s holds order %d: %s (%s) after %d retries\n", orders.Names()[3], l.Value.ID, l.Death.Reason, l.Death.Error, l.Death.Retries)
	}
	fixed.Store(true)
	rep, err := topology.Replay(ctx, oq, topology.ReplayOptions[Order]{
		Filter: func(l *topology.Letter[Order]) bool { return l.Death.Reason == topology.ReasonRejected },
	})
	if err != nil {
		return err
	}
	if err := until(ctx, func() bool { return osrc.Stats().Acked == 7 }); err != nil {
		return fmt.Errorf("waiting for the replayed order to settle: %w", err)
	}
	fmt.Fprintf(w, "replayed %d, kept %d; order 5: %s\n", rep.ReplayedCount, rep.Kept, strings.Join(j.get("order 5"), "; "))
	return nil
}

// start runs a pipeline of one processor stage over src, which obs, when
// not nil, exports under srcName.
func start[T any](ctx context.Context, name, srcName string, src *topology.Source[T], h processor.Handler[T, T], log *slog.Logger, obs *observe.Observer) (*pipeline.Pipeline[T, T], error) {
	p, err := pipeline.New(pipeline.Options[T, T]{
		Name:       name,
		Logger:     log,
		Producer:   producer.Options[T]{Source: src},
		Processors: processor.Options[T, T]{Concurrency: 2, Handle: h},
	})
	if err != nil {
		return nil, err
	}
	if obs != nil {
		// Adding is setup, not the work an interrupt stops: StatsTimeout bounds it.
		if err := errors.Join(obs.Add(context.WithoutCancel(ctx), p), obs.AddTopology(srcName, src)); err != nil {
			return nil, err
		}
	}
	return p, p.Start(ctx)
}

// until polls cond until it holds or ctx ends.
func until(ctx context.Context, cond func() bool) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}
