package kafkatopic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/kafkaconn"
	"github.com/boulevard-go/boulevard/internal/kafkalimits"
	"github.com/boulevard-go/boulevard/internal/kafkareach"
	"github.com/boulevard-go/boulevard/internal/kafkarefusal"
	"github.com/boulevard-go/boulevard/internal/kafkatopicid"
	"github.com/boulevard-go/boulevard/internal/logburst"
	"github.com/boulevard-go/boulevard/internal/repeatlog"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/internal/goexit"
	"github.com/boulevard-go/boulevard/topic/internal/hookcall"
	"github.com/boulevard-go/boulevard/topic/internal/undecodable"
)

// bsub is one broadcast subscriber: a consumer of every partition of the
// topic, from the log end as of Subscribe, with a client of its own and no
// consumer group. A broadcast subscriber has no durable position to resume
// from (as an in-memory broadcast subscriber, it sees what is published
// while it is subscribed), so it neither joins a group nor commits: a
// group per subscriber would leave one abandoned group in the cluster for
// every subscriber that ever existed.
//
// Its read-ahead is bounded by broadcast.queue_capacity; a subscriber that
// reads slower than the topic is written stops fetching, and the log keeps
// the records by retention. If it falls below the log start (retention
// deleted records it had not fetched), it gets a lag notice with the number
// it missed on that partition: under drop_oldest it continues from the
// oldest record kept; under disconnect the notice is final (counting
// everything it had not read) and the subscription ends.
type bsub[T any] struct {
	t      *kTopic[T]
	client sarama.Client
	conns  *kafkaconn.Set // the client's connections
	cons   sarama.Consumer
	// reach tells the subscriber's SubscriberOptions.Reach when its
	// client can reach no broker, and when it reads again; the client's
	// responses are heard through Config.MetricRegistry (newClient).
	reach *kafkareach.Reach

	stopCh   chan struct{}
	stopOne  sync.Once
	pumps    sync.WaitGroup
	teardown sync.Once
	// fails are the partitions' fetch errors that go on, the partitions
	// failing alike one run, logged at growing intervals.
	fails repeatlog.Partitions
	// undecodable holds back, per partition, the lines of records that do
	// not decode that follow the last one logged by less than
	// logburst.Interval.
	undecodable logburst.Keyed[int32]

	mu      sync.Mutex
	queue   []bitem[T]
	head    int
	nextID  topic.MessageID
	closed  bool  // Close: Receive ends at once
	ended   bool  // no more records: Receive drains, then ends
	failed  error // why fetching stopped (a partition that cannot be decoded): Receive returns it once drained
	failing bool  // endCorrupt was called
	dataSig chan struct{}
	room    chan struct{}
	// parts are the partitions the subscriber reads, with their figures
	// (Stats' Partitions).
	parts map[int32]*bpart
	// id keeps the topic's ID (Kafka 2.8's metadata v10 on) as of
	// Subscribe, or as of the last time the subscriber saw it change (the
	// topic was deleted and created again); off when the cluster or the
	// protocol version gives none, and the subscriber does not ask again.
	id kafkatopicid.Watch
}

// bpart is a partition a broadcast subscriber reads; guarded by its mu.
type bpart struct {
	hw highWater // the partition's consumer
	// pos is the offset after the last record of the partition handed out
	// or skipped, or the oldest record kept once a lag notice of the
	// partition is handed out, or the oldest record of the partition once
	// its topic was created again, the log end as of Subscribe before any.
	pos int64
	// queued counts the partition's records queued, not yet handed out.
	queued int
	// skipped is the offset after the last record of the partition
	// skipped while records fetched before it were queued (0: none): pos
	// moves to it once they are handed out.
	skipped int64
	// stale counts the partition's items queued before its topic was
	// created again (the old partition's), which move pos no more.
	stale    int
	fetchErr fetchErr // the last failed fetch while none returned records since
	// anew is signalled when the subscriber finds the topic's ID changed:
	// the partition's pump reads the new partition from its oldest record.
	anew chan struct{}
}

// bitem is a fetched value of partition part at offset off, or
// (lagged > 0) a lag notice: under drop_oldest its partition's records up
// to off (the one before the oldest kept) were missed; the final notice
// of disconnect has off -1.
type bitem[T any] struct {
	v      T
	hdr    topic.Headers
	lagged uint64
	part   int32
	off    int64
}

// subscribeBroadcast starts a broadcast subscriber within parent and
// Options.AdminTimeout: its client's connections are cut when either ends
// (or the topic closes) before it has read every partition's log end, and
// it returns an error wrapping parent's error or
// context.DeadlineExceeded (or topic.ErrTopicClosed). It reports to
// observer (nil: none) when it cannot read from the cluster.
func (t *kTopic[T]) subscribeBroadcast(parent context.Context, observer topic.ReachObserver) (*bsub[T], error) {
	b := t.b
	ctx, cancel := t.adminContext(parent)
	defer cancel()
	// A reader of its own partitions holds no group session: it reads as
	// long as it is subscribed (kafkareach.Reach).
	reach := &kafkareach.Reach{Health: hookcall.Reach(observer, b.log, slog.String("topic", t.kname))}
	reach.SessionStarted()
	client, conns, err := b.newClient(ctx, reach)
	if err != nil {
		select {
		case <-t.closedCh:
			return nil, topic.ErrTopicClosed
		default:
		}
		return nil, err
	}
	// Until every partition consumer has started (stop, below).
	stop := conns.CutWhenDone(ctx)
	cons, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		stop()
		_ = client.Close()
		return nil, fmt.Errorf("%w: %w", ErrConnect, b.red.Err(err))
	}
	s := &bsub[T]{t: t, client: client, conns: conns, cons: cons, reach: reach, stopCh: make(chan struct{}), dataSig: make(chan struct{}, 1), parts: map[int32]*bpart{},
		fails:       repeatlog.Partitions{Msg: "kafkatopic: broadcast consumer error", Log: b.log},
		undecodable: logburst.Keyed[int32]{Log: b.log, Level: slog.LevelWarn, Msg: "kafkatopic: record does not decode; skipped"}}
	fail := func(err error) (*bsub[T], error) {
		if !stop() {
			err = ctx.Err() // the connections were cut
		}
		s.shutdown()
		select {
		case <-t.closedCh:
			return nil, topic.ErrTopicClosed
		default:
		}
		return nil, fmt.Errorf("%w: starting a broadcast subscriber of topic %q: %w", ErrAdmin, t.kname, b.red.Err(err))
	}
	s.id = kafkatopicid.Watch{Client: client, Topic: t.kname}
	if err := s.id.Start(); err != nil {
		return fail(err)
	}
	parts, err := client.Partitions(t.kname)
	if err != nil {
		return fail(err)
	}
	kafkalimits.ShareChannels(client.Config(), len(parts), t.opts.Broadcast.Capacity)
	for _, p := range parts {
		off, err := client.GetOffset(t.kname, p, sarama.OffsetNewest)
		if err != nil {
			return fail(err)
		}
		pc, err := cons.ConsumePartition(t.kname, p, off)
		if err != nil {
			return fail(err)
		}
		s.mu.Lock()
		s.parts[p] = &bpart{hw: pc, pos: off, anew: make(chan struct{}, 1)}
		s.mu.Unlock()
		s.pumps.Add(1)
		go s.pump(p, pc, off)
	}
	if !stop() {
		return fail(ctx.Err())
	}
	if s.id.On() {
		s.pumps.Go(s.watchID)
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		s.shutdown()
		return nil, topic.ErrTopicClosed
	}
	t.broadcasts[s] = struct{}{}
	t.mu.Unlock()
	return s, nil
}

// pump queues one partition's records, from offset next on. A fetch
// error that goes on (sarama retries it while the cluster cannot be
// reached) is logged when it begins and then at growing intervals, not
// once per retry, the partitions failing alike (with one cause) one run
// (repeatlog.Partitions); a partition leaves its run when it delivers a
// record, and the run ends, with one INFO line, when its last partition
// does. The first record fetched after a failed fetch is queued once the
// topic's ID is checked (checkID): the failure may have been the topic's
// deletion, and the record one of the topic created again.
func (s *bsub[T]) pump(part int32, pc sarama.PartitionConsumer, next int64) {
	defer s.pumps.Done()
	b := s.t.b
	var msgs <-chan *sarama.ConsumerMessage
	var errs <-chan *sarama.ConsumerError
	var stop <-chan struct{}
	s.mu.Lock()
	anewCh := s.parts[part].anew
	s.mu.Unlock()
	var anew <-chan struct{}
	// decoding is the record the codec decodes, nil between records: a
	// Goexit of the codec ends the goroutine while it is set.
	var decoding *sarama.ConsumerMessage
	skipUndecodable := func(rec *sarama.ConsumerMessage, err error, attrs ...slog.Attr) {
		s.t.undecodable.Add(1)
		undecodable.LogKafka(context.Background(), &s.undecodable, rec, err, attrs...)
		s.skipped(part, rec.Offset)
	}
	// drain reads pc until it ends and reports why it ended with the
	// subscription still open: below the log start, or its topic created
	// again.
	drain := func() ending {
		// again: the topic was created again; discard: the records
		// still to come are the new partition's, read again from its
		// oldest.
		outOfRange, again, discard, failed := false, false, false, false
		for msgs != nil || errs != nil {
			select {
			case rec, ok := <-msgs:
				if !ok {
					msgs = nil
					continue
				}
				next = rec.Offset + 1
				s.fails.Fetched(context.Background(), part)
				s.reach.Reading()
				if stop == nil || discard {
					continue // drained, not queued
				}
				if failed && !again {
					failed = false
					if s.checkID() {
						// The record, and those fetched after it, are the
						// new partition's.
						again, discard = true, true
						pc.AsyncClose()
						continue
					}
				}
				decoding = rec
				v, err := topic.Decode(b.opts.Codec, rec.Value)
				decoding = nil
				if err != nil {
					skipUndecodable(rec, err)
					continue
				}
				if !s.push(bitem[T]{v: v, hdr: envelopeHeaders(rec.Headers), part: part, off: rec.Offset}) {
					pc.AsyncClose()
					stop = nil
				}
			case cerr, ok := <-errs:
				if !ok {
					errs = nil
					continue
				}
				if errors.Is(cerr.Err, sarama.ErrOffsetOutOfRange) {
					outOfRange = true
					continue
				}
				if kafkarefusal.SaramaCorrupt(cerr.Err) {
					s.endCorrupt(part, next, cerr.Err) // closes stopCh: pc closes below
					continue
				}
				failed = true
				red := b.red.Err(cerr)
				s.fetchFailed(part, red)
				s.reach.SaramaError(red)
				s.fails.Fail(context.Background(), part, red, b.red.Err(cerr.Err), slog.String("topic", s.t.kname))
			case <-anew:
				// What the consumer fetched before the change was seen
				// is queued: records of the old topic it held back (its
				// read-ahead full), or of the new one, read twice.
				again = true
				anew = nil
				pc.AsyncClose()
			case <-stop:
				pc.AsyncClose()
				stop = nil
			}
		}
		switch {
		case stop == nil:
			return endedClosed
		case again:
			return endedAnew
		case outOfRange:
			return endedOutOfRange
		}
		return endedClosed
	}
	loop := func() {
		for {
			if msgs == nil && errs == nil {
				msgs, errs, stop, anew = pc.Messages(), pc.Errors(), s.stopCh, anewCh
			}
			var err error
			why := "falling below the log start"
			switch drain() {
			case endedClosed:
				return
			case endedOutOfRange:
				pc, next, err = s.lagged(part, next)
			case endedAnew:
				why = "its topic was created again"
				pc, next, err = s.createdAgain(part)
			}
			if err == nil && pc != nil {
				s.mu.Lock()
				s.parts[part].hw = pc
				s.mu.Unlock()
			}
			if err != nil || pc == nil {
				if err != nil {
					b.log.Warn("kafkatopic: broadcast subscriber cannot continue on a partition after "+why,
						slog.String("topic", s.t.kname), slog.Int("partition", int(part)), slog.Any("error", b.red.Err(err)))
				}
				return
			}
			msgs, errs = nil, nil
		}
	}
	// A codec that ends the goroutine (runtime.Goexit) makes its record
	// one that does not decode, and the pump goes on (on a new goroutine
	// the ending one waits for).
	goexit.Resume(loop, func(stack string) bool {
		rec := decoding
		if rec == nil {
			return false
		}
		decoding = nil
		skipUndecodable(rec, message.ErrHandlerExited, slog.String("stack", stack))
		return true
	})
}

// ending is why a pump's partition consumer ended.
type ending int

const (
	endedClosed     ending = iota // the subscription stopped
	endedOutOfRange               // its next offset is out of the partition's range
	endedAnew                     // its topic was created again
)

// checkID asks for the topic's ID and, when it is another than the
// subscriber knew (the topic was deleted and created again), signals
// every partition's pump to read its new partition from the oldest
// record; it reports whether the ID changed (kafkatopicid.Watch.Changed).
func (s *bsub[T]) checkID() bool {
	if !s.id.Changed() {
		return false
	}
	s.anew()
	return true
}

// anew signals every partition's pump to read its new partition from the
// oldest record.
func (s *bsub[T]) anew() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.parts {
		select {
		case p.anew <- struct{}{}:
		default:
		}
	}
}

// watchID checks the topic's ID every Options.HighWaterInterval until the
// subscriber stops: a partition consumer that fetched nothing while the
// topic was deleted (its read-ahead full, or the topic deleted and
// created again between two fetches) saw no failure, and would go on
// from its position in the new partition, past records it never read.
func (s *bsub[T]) watchID() {
	s.id.Run(s.t.b.opts.HighWaterInterval, s.stopCh, s.anew)
}

// createdAgain returns a consumer of partition part from its oldest
// record, the topic having been created again, and moves the
// subscriber's position there (beginAnew).
func (s *bsub[T]) createdAgain(part int32) (sarama.PartitionConsumer, int64, error) {
	t := s.t
	oldest, err := s.client.GetOffset(t.kname, part, sarama.OffsetOldest)
	if err != nil {
		return nil, 0, err
	}
	return s.readAnew(part, oldest, "kafkatopic: broadcast subscriber's topic was created again (its topic ID changed); reading the partition from its oldest record")
}

// readAnew returns a consumer of partition part from oldest, its topic
// created again, and moves the subscriber's position there (beginAnew);
// it logs msg at INFO.
func (s *bsub[T]) readAnew(part int32, oldest int64, msg string) (sarama.PartitionConsumer, int64, error) {
	t := s.t
	t.b.log.Info(msg, slog.String("topic", t.kname), slog.Int("partition", int(part)), slog.Int64("offset", oldest))
	pc, err := s.cons.ConsumePartition(t.kname, part, oldest)
	if err == nil {
		s.beginAnew(part, pc, oldest)
	}
	return pc, oldest, err
}

// lagged handles a partition whose next offset is out of its range. One
// that fell below the log start queues the lag notice and, under
// drop_oldest, returns a consumer from the oldest record kept; under
// disconnect it ends the subscription and returns nil. One past the log
// end, its topic deleted and created again (the new partition's offsets
// begin anew), returns a consumer from the oldest record, with no lag
// notice: every record of the new partition was published while the
// subscriber was subscribed.
func (s *bsub[T]) lagged(part int32, next int64) (sarama.PartitionConsumer, int64, error) {
	t := s.t
	oldest, err := s.client.GetOffset(t.kname, part, sarama.OffsetOldest)
	if err != nil {
		return nil, next, err
	}
	if oldest < next {
		s.checkID() // the other partitions' topic was created again too
		return s.readAnew(part, oldest, "kafkatopic: broadcast subscriber's partition begins anew; reading it from its oldest record")
	}
	missed := uint64(max(oldest-next, 1))
	if t.opts.Broadcast.OnLag == topic.Disconnect {
		newest, err := s.client.GetOffset(t.kname, part, sarama.OffsetNewest)
		if err != nil {
			newest = oldest
		}
		s.disconnect(uint64(max(newest-next, 1)))
		return nil, next, nil
	}
	t.b.log.Warn("kafkatopic: broadcast subscriber fell below the log start and missed records",
		slog.String("topic", t.kname), slog.Int("partition", int(part)), slog.Uint64("missed", missed))
	t.lagged.Add(missed)
	if !s.push(bitem[T]{lagged: missed, part: part, off: oldest - 1}) {
		return nil, next, nil
	}
	pc, err := s.cons.ConsumePartition(t.kname, part, oldest)
	return pc, oldest, err
}

// beginAnew moves the subscriber's position on partition part, whose
// topic was created again, to oldest, where pc, its new consumer, reads
// from: the items of the old partition still queued no longer move it,
// nor does the old partition's log end listed count in its high-water
// mark.
func (s *bsub[T]) beginAnew(part int32, pc sarama.PartitionConsumer, oldest int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.parts[part]
	if p == nil {
		return
	}
	p.hw, p.pos, p.skipped, p.stale = pc, oldest, 0, 0
	s.t.b.ends.Forget(s.t.kname, part) // the old partition's
	select {
	case <-p.anew: // a change of the topic's ID seen before pc was made
	default:
	}
	for _, it := range s.queue[s.head:] {
		if it.part == part {
			p.stale++
		}
	}
}

// disconnect ends the subscription with one final lag notice counting
// unread, the unread records of the partition, plus what was queued.
func (s *bsub[T]) disconnect(unread uint64) {
	t := s.t
	t.mu.Lock()
	delete(t.broadcasts, s) // no longer a connected subscriber
	t.mu.Unlock()
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	for _, it := range s.queue[s.head:] {
		if it.lagged > 0 {
			unread += it.lagged
		} else {
			unread++
		}
	}
	clear(s.queue)
	s.queue = append(s.queue[:0], bitem[T]{lagged: unread, off: -1})
	s.head = 0
	s.ended = true
	t.lagged.Add(unread) // before the notice can be received
	s.mu.Unlock()
	t.b.log.Warn("kafkatopic: broadcast subscriber fell below the log start; disconnected",
		slog.String("topic", t.kname), slog.Uint64("missed", unread))
	s.signal()
	s.stopOne.Do(func() { close(s.stopCh) })
}

// endCorrupt ends the subscription for err, a fetch of partition part
// from offset next that cannot be decoded (kafkarefusal.SaramaCorrupt):
// sarama fetches the same bytes again for ever, and skipping them would
// lose their records. The first such error is logged at ERROR, naming
// the partition and the offset, and is what Receive returns, wrapped in
// ErrCorruptBatch, once it has handed out what was queued; every pump
// stops.
func (s *bsub[T]) endCorrupt(part int32, next int64, err error) {
	t := s.t
	s.mu.Lock()
	if s.ended || s.failing {
		s.mu.Unlock()
		return
	}
	s.failing = true
	s.mu.Unlock()
	// Logged before Receive can return the error.
	t.b.log.Error("kafkatopic: partition fetch cannot be decoded; the broadcast subscription ends",
		slog.String("topic", t.kname), slog.Int("partition", int(part)), slog.Int64("offset", next),
		slog.Any("error", t.b.red.Err(err)))
	t.mu.Lock()
	delete(t.broadcasts, s) // no longer a connected subscriber
	t.mu.Unlock()
	s.mu.Lock()
	if !s.ended {
		s.failed = corruptFetch(t.kname, part, next, t.b.red.Err(err))
		s.ended = true
	}
	s.mu.Unlock()
	s.signal()
	s.stopOne.Do(func() { close(s.stopCh) })
}

// push queues it, waiting for room; false once the subscriber stopped.
func (s *bsub[T]) push(it bitem[T]) bool {
	capacity := s.t.opts.Broadcast.Capacity
	s.mu.Lock()
	for len(s.queue)-s.head >= capacity && it.lagged == 0 {
		if s.ended {
			s.mu.Unlock()
			return false
		}
		if s.room == nil {
			s.room = make(chan struct{})
		}
		room := s.room
		s.mu.Unlock()
		select {
		case <-room:
		case <-s.stopCh:
			return false
		}
		s.mu.Lock()
	}
	if s.ended {
		s.mu.Unlock()
		return false
	}
	if p := s.parts[it.part]; p != nil && it.lagged == 0 {
		p.queued++
		p.fetchErr = fetchErr{}
	}
	s.queue = append(s.queue, it)
	s.mu.Unlock()
	s.signal()
	return true
}

func (s *bsub[T]) signal() {
	select {
	case s.dataSig <- struct{}{}:
	default:
	}
}

// Receive implements topic.SubscriptionState.
func (s *bsub[T]) Receive(ctx context.Context, dst []topic.Envelope[T]) (int, error) {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return 0, topic.ErrSubscriptionClosed
		}
		n := 0
		for n < len(dst) && s.head < len(s.queue) {
			it := s.queue[s.head]
			s.queue[s.head] = bitem[T]{}
			s.head++
			if p := s.parts[it.part]; p != nil {
				if p.stale > 0 {
					p.stale--
					if it.lagged == 0 {
						p.queued--
					}
				} else if it.lagged == 0 {
					p.queued--
					p.pos = it.off + 1
				} else {
					p.pos = max(p.pos, it.off+1)
				}
				if p.queued == 0 {
					p.pos, p.skipped = max(p.pos, p.skipped), 0
				}
			}
			s.nextID++
			dst[n] = topic.Envelope[T]{ID: s.nextID, Value: it.v, Headers: it.hdr, Lagged: it.lagged}
			n++
		}
		s.queue, s.head = compactQueue(s.queue, s.head)
		if n > 0 {
			if s.room != nil {
				close(s.room)
				s.room = nil
			}
			s.mu.Unlock()
			return n, nil
		}
		ended, failed := s.ended, s.failed
		s.mu.Unlock()
		if failed != nil {
			return 0, failed
		}
		if ended {
			return 0, topic.ErrSubscriptionClosed
		}
		select {
		case <-s.dataSig:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// Settle implements topic.SubscriptionState: a broadcast subscriber has no
// group to settle with, so it returns ErrMessageNotTracked.
func (s *bsub[T]) Settle(topic.MessageID, error) error { return topic.ErrMessageNotTracked }

// Close implements topic.SubscriptionState. It returns within
// Options.AdminTimeout (see Backend.closeWithin).
func (s *bsub[T]) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.stop(true)
}

// stop stops fetching; Receive then drains what was fetched (unless
// closed) and ends.
func (s *bsub[T]) stop(bool) {
	s.mu.Lock()
	s.ended = true
	s.mu.Unlock()
	s.signal()
	s.shutdown()
	t := s.t
	t.mu.Lock()
	delete(t.broadcasts, s)
	t.mu.Unlock()
}

// shutdown stops the pumps and closes the consumer and client, within
// Options.AdminTimeout (see Backend.closeWithin).
func (s *bsub[T]) shutdown() {
	s.teardown.Do(func() {
		s.t.b.closeWithin(s.conns, func() {
			s.stopOne.Do(func() { close(s.stopCh) })
			s.pumps.Wait()
			_ = s.cons.Close()
			_ = s.client.Close()
		})
		s.undecodable.Flush(context.Background())
	})
}
