package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/boulevard-go/boulevard/sources/kafka/franz"
)

// The franz-go comparison (-client franz): the same backlog read by
//
//   - plain: one franz-go group member polling in a loop (PollFetches) and
//     counting every record, its offsets auto-committed every second (the
//     offsets of what it polled);
//   - boulevard: the franz-go source (package franz, one member) feeding
//     the same pipeline as the sarama comparison; it commits the handled
//     prefix every second (its default CommitInterval).
//
// Both sides get the same client options (franzOptions): group timeouts
// like saramaConfig's and franz-go's defaults for everything else (fetch
// sizes, the cooperative-sticky balancer); the source then adds the options
// it owns (manual commits, the reset offset, the partition callbacks).

// commitEvery is the commit cadence of both franz-go sides: kgo's
// auto-commit interval for the plain loop, the source's CommitInterval.
const commitEvery = time.Second

// franzOptions are the client options both franz-go sides share: the
// source's fetch wait (franz.DefaultFetchMaxWait, which it sets unless
// told otherwise) is the plain loop's too.
func franzOptions() []kgo.Opt {
	return []kgo.Opt{
		kgo.HeartbeatInterval(200 * time.Millisecond),
		kgo.SessionTimeout(3 * time.Second),
		kgo.FetchMaxWait(franz.DefaultFetchMaxWait),
	}
}

// runPlainFranz is the plain franz-go loop. With -plain-processors it
// hands each record to a processor goroutine (handOff), which counts it and
// marks it for the next auto-commit (kgo.AutoCommitMarks), so that only
// handled records are committed.
func runPlainFranz(ctx context.Context, cfg config, brokers []string, group string, c *clock) error {
	opts := append(franzOptions(),
		kgo.SeedBrokers(brokers...),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AutoCommitInterval(commitEvery),
		kgo.WithHooks(franzHook{&c.fetched}),
	)
	n := plainProcessors(cfg)
	if n > 0 {
		opts = append(opts, kgo.AutoCommitMarks())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	var procs *handOff[*kgo.Record]
	poll := ctx
	if n > 0 {
		procs = startHandOff(n, func(r *kgo.Record) {
			c.tick()
			cl.MarkCommitRecords(r)
		})
		// Before the client closes (deferred above, so run after this).
		defer procs.close()
		// The last records are counted by the processors while the loop
		// already waits in the next poll, which no record will end: end
		// it when the count is complete.
		pctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()
		wg.Go(func() {
			select {
			case <-c.done:
				cancel()
			case <-pctx.Done():
			}
		})
		poll = pctx
	}
	for {
		select {
		case <-c.done:
			return c.check("plain")
		default:
		}
		fs := cl.PollFetches(poll)
		if ctx.Err() != nil {
			// The run's deadline: a run that has counted every record
			// never polls again.
			return errors.Join(c.check("plain"), fmt.Errorf("plain: %w", ctx.Err()))
		}
		if poll.Err() != nil {
			return c.check("plain")
		}
		if errs := fs.Errors(); len(errs) > 0 {
			return errs[0].Err
		}
		if procs == nil {
			fs.EachRecord(func(*kgo.Record) { c.tick() })
			continue
		}
		stopped := false
		fs.EachRecord(func(r *kgo.Record) {
			if !stopped && !procs.send(poll, int(r.Partition), r) {
				stopped = true
			}
		})
		if stopped {
			return c.check("plain")
		}
	}
}

func runBoulevardFranz(ctx context.Context, cfg config, brokers []string, group string, c *clock) error {
	src, err := franz.New(franz.Options{
		Brokers:        brokers,
		GroupID:        group,
		Topics:         []string{topic},
		InitialOffset:  franz.OffsetEarliest,
		CommitInterval: commitEvery,
		Unordered:      cfg.Unordered,
		ClientOptions:  append(franzOptions(), kgo.WithHooks(franzHook{&c.fetched})),
	})
	if err != nil {
		return err
	}
	return runPipeline(ctx, cfg, src, c)
}
