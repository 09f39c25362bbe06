// Package kafkaends lists the log ends of the Kafka partitions a reader
// or a backend reads, for the high-water marks of its figures: a consumer
// that does not fetch (its buffer full, its partition paused, its
// handlers stuck) learns of no record produced meanwhile from its
// fetches.
package kafkaends

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/kafkaconn"
)

// Timeout bounds each listing of Run, and each of a Kafka source
// member's listings of the end offsets of its claimed partitions.
const Timeout = 5 * time.Second

// Partition is a partition of a topic.
type Partition struct {
	Topic string
	Part  int32
}

// Ends are the log ends of the partitions read, as the brokers listed
// them last.
type Ends struct {
	mu sync.Mutex
	m  map[Partition]int64
	// listings counts the listings begun (Begin); forgot holds, by
	// partition, the count when Forget was called, so that a listing
	// begun before keeps no end for it.
	listings uint64
	forgot   map[Partition]uint64
}

// End returns the log end listed last for partition part of topic, 0 if
// none.
func (l *Ends) End(topic string, part int32) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m[Partition{topic, part}]
}

// Forget drops the log end listed of partition part of topic, which no
// longer holds (its topic was deleted and created again): until a
// listing begun after the call lists it, End returns 0.
func (l *Ends) Forget(topic string, part int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := Partition{topic, part}
	delete(l.m, k)
	if l.forgot == nil {
		l.forgot = make(map[Partition]uint64)
	}
	l.forgot[k] = l.listings
}

// Begin returns the listing that begins, for Keep.
func (l *Ends) Begin() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.listings++
	return l.listings
}

// Keep sets the listed ends to those of read, the partitions read now:
// a partition's end from got, what listing (Begin) listed, or the end
// listed before for one whose listing failed; none for a partition
// forgotten since listing began (Forget).
func (l *Ends) Keep(listing uint64, read []Partition, got map[Partition]int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := make(map[Partition]int64, len(read))
	for _, k := range read {
		if f, ok := l.forgot[k]; ok && f >= listing {
			continue
		}
		if end, ok := got[k]; ok {
			m[k] = end
		} else if end, ok := l.m[k]; ok {
			m[k] = end
		}
	}
	maps.DeleteFunc(l.forgot, func(_ Partition, f uint64) bool { return f < listing })
	l.m = m
}

// Lines are the messages of the DEBUG lines a Lister logs; a line whose
// message is empty is not logged.
type Lines struct {
	// NoLeader: a partition read whose leader is not known (attributes
	// topic, partition, error); its end is not listed.
	NoLeader string
	// Broker: a leader's request failed (broker, error).
	Broker string
	// Partition: a leader answered an error for a partition (topic,
	// partition, error).
	Partition string
	// Lookup: the metadata of the topics whose leaders are to be looked
	// up could not be had (topics, error).
	Lookup string
}

// ReaderLines are the Lines of a backend that lists the log ends of the
// partitions its readers read, each message beginning with prefix (the
// backend's name and a colon: "kafkatopic: ").
func ReaderLines(prefix string) Lines {
	return Lines{
		NoLeader:  prefix + "the leader of a partition read is unknown; its log end is not listed",
		Broker:    prefix + "listing the log ends of partitions read failed",
		Partition: prefix + "listing the log end of a partition read failed",
		Lookup:    prefix + "looking up the leaders of partitions read failed",
	}
}

// SourceLines are the Lines of a Kafka source member's listing of the
// end offsets of its claimed partitions, the sarama and the franz-go
// source's alike.
func SourceLines() Lines {
	return Lines{
		NoLeader:  "kafka partition leader unknown; end offset not listed",
		Broker:    "kafka end offsets not listed",
		Partition: "kafka partition end offset not listed",
		Lookup:    "kafka partition leaders not looked up",
	}
}

// LogNoLeader logs the NoLeader line of partition k, whose leader is
// not known for err, to log.
func (ls Lines) LogNoLeader(log *slog.Logger, k Partition, err error) {
	debug(log, ls.NoLeader, slog.String("topic", k.Topic), slog.Int("partition", int(k.Part)), slog.Any("error", err))
}

// LogBroker logs the Broker line of the request to the leader at addr
// that failed with err to log.
func (ls Lines) LogBroker(log *slog.Logger, addr string, err error) {
	debug(log, ls.Broker, slog.String("broker", addr), slog.Any("error", err))
}

// LogPartition logs the Partition line of partition k, for which a
// leader answered err, to log.
func (ls Lines) LogPartition(log *slog.Logger, k Partition, err error) {
	debug(log, ls.Partition, slog.String("topic", k.Topic), slog.Int("partition", int(k.Part)), slog.Any("error", err))
}

// LogLookup logs the Lookup line of the metadata of topics that could
// not be had for err to log.
func (ls Lines) LogLookup(log *slog.Logger, topics []string, err error) {
	debug(log, ls.Lookup, slog.Any("topics", topics), slog.Any("error", err))
}

// debug logs msg at DEBUG with attrs to log, unless msg is empty.
func debug(log *slog.Logger, msg string, attrs ...any) {
	if msg != "" {
		log.Debug(msg, attrs...)
	}
}

// Lister lists the log ends of partitions: one ListOffsets request per
// leader, the leaders at once, on connections of its own, kept from one
// listing to the next (a request that fails on a kept one is sent once
// more on a new one: a broker closes a connection idle past its
// connections.max.idle.ms), closed by a listing of no partitions, and
// cut when a listing's context ends.
// sarama's own requests take no context, and an answer they wait for
// holds the broker's connection, which the client's other requests
// share.
//
// A partition's leader is the one the listings learned: a listing asks
// for the metadata of the topics of the partitions whose leader it does
// not know, and of those whose leader it found stale (its answer saying
// the broker does not lead the partition, or its request to the broker
// failing), on its own connections, within its context; the next
// listings ask the leaders that metadata names. Nothing else would
// refresh the leaders of partitions a reader does not fetch.
//
// The end listed is the one a reader of the client's
// Consumer.IsolationLevel reads up to: under sarama.ReadCommitted the last
// stable offset, which leaves out the records of transactions still open,
// else the high-water mark.
//
// A Lister is for one goroutine at a time; Close closes its connections.
type Lister struct {
	// Client is the reader's or the backend's: its config (Client.Config)
	// is the listing's, and the brokers it knows (Client.Brokers) are
	// asked for metadata when no connection of the listing answers.
	Client sarama.Client
	// Conns is the set the listing's connections are a child of
	// (kafkaconn.Set.Child): cutting it cuts them too.
	Conns *kafkaconn.Set
	// Log takes the DEBUG lines of failed listings, Lines their
	// messages.
	Log   *slog.Logger
	Lines Lines
	// Clean rewrites an error before it is logged (to leave credentials
	// out).
	Clean func(error) error

	cfg     *sarama.Config
	conns   *kafkaconn.Set            // nil until the first listing, and after a cut
	brokers map[string]*sarama.Broker // by address, open on conns
	leaders map[Partition]string      // leaders' addresses learned, by partition read
	// topicErrs are the errors the last metadata answered for topics
	// (one that does not exist, or that the client may not describe),
	// by topic: why their partitions have no leader.
	topicErrs map[string]error
}

// Run lists the log ends of the partitions read returns into ends every
// interval until stop is closed, each listing within Timeout and cut
// short when stop is closed. It closes the listing's connections before
// it returns.
func (l *Lister) Run(ends *Ends, interval time.Duration, read func() []Partition, stop <-chan struct{}) {
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	defer func() { cancel(); <-watched }()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		listing := ends.Begin()
		rd := read()
		lctx, lcancel := context.WithTimeout(ctx, Timeout)
		ends.Keep(listing, rd, l.List(lctx, rd))
		lcancel()
	}
}

// List asks the leaders of the partitions read for their log ends within
// ctx, and returns the ends it had; a failure is logged at DEBUG and
// leaves its partitions out. The listing's connections are cut when ctx
// ends, and the next listing connects again; a listing of no partitions
// closes them.
func (l *Lister) List(ctx context.Context, read []Partition) map[Partition]int64 {
	got := map[Partition]int64{}
	if len(read) == 0 {
		l.Close() // nothing read: no connection is held until something is
		return got
	}
	if l.conns == nil {
		l.cfg, l.conns = l.Conns.Child(l.Client.Config())
		l.brokers = make(map[string]*sarama.Broker)
	}
	stop := l.conns.CutWhenDone(ctx)
	defer func() {
		if !stop() {
			l.Close() // cut: the next listing connects again
		}
	}()
	isRead := make(map[Partition]bool, len(read))
	topicRead := make(map[string]bool)
	for _, k := range read {
		isRead[k], topicRead[k.Topic] = true, true
	}
	maps.DeleteFunc(l.leaders, func(k Partition, _ string) bool { return !isRead[k] })
	maps.DeleteFunc(l.topicErrs, func(topic string, _ error) bool { return !topicRead[topic] })
	var unknown []string // topics of partitions whose leader is not known
	for _, k := range read {
		if _, ok := l.leaders[k]; !ok && !slices.Contains(unknown, k.Topic) {
			unknown = append(unknown, k.Topic)
		}
	}
	var lookupErr error
	if len(unknown) > 0 {
		lookupErr = l.lookUp(ctx, unknown)
	}
	byLeader := make(map[string][]Partition)
	for _, k := range read {
		addr, ok := l.leaders[k]
		if !ok {
			l.Lines.LogNoLeader(l.Log, k, l.clean(cmp.Or(lookupErr, l.topicErrs[k.Topic], error(sarama.ErrLeaderNotAvailable))))
			continue
		}
		byLeader[addr] = append(byLeader[addr], k)
	}
	for addr, b := range l.brokers {
		if byLeader[addr] == nil {
			_ = b.Close() // leads none of the partitions read now
			delete(l.brokers, addr)
		}
	}
	stale := map[string]bool{} // topics whose leaders to look up again
	var mu sync.Mutex
	var wg sync.WaitGroup
	failed := make(map[string]bool)
	renewed := make(map[string]*sarama.Broker)
	for addr, ks := range byLeader {
		kept := l.brokers[addr] != nil
		b, err := l.open(addr)
		if err != nil {
			l.Lines.LogBroker(l.Log, addr, l.clean(err))
			for _, k := range ks {
				stale[k.Topic] = true
			}
			continue
		}
		wg.Go(func() {
			resp, err := b.GetAvailableOffsets(l.request(ks))
			if err != nil && kept && ctx.Err() == nil {
				// The connection, idle since the listing before, may
				// have ended meanwhile (a broker closes one idle past
				// its connections.max.idle.ms): once more on a new one.
				_ = b.Close()
				b = sarama.NewBroker(addr)
				if err = b.Open(l.cfg); err == nil {
					resp, err = b.GetAvailableOffsets(l.request(ks))
				}
				mu.Lock()
				renewed[addr] = b
				mu.Unlock()
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed[addr] = true
				l.Lines.LogBroker(l.Log, addr, l.clean(err))
				for _, k := range ks {
					stale[k.Topic] = true // the broker may be gone, its partitions led elsewhere
				}
				return
			}
			for _, k := range ks {
				blk := resp.GetBlock(k.Topic, k.Part)
				err := error(sarama.ErrIncompleteResponse)
				if blk != nil {
					err = blk.Err
				}
				if errors.Is(err, sarama.ErrNoError) && len(blk.Offsets) == 1 {
					got[k] = blk.Offsets[0]
					continue
				}
				if blk != nil && leaderMoved(blk.Err) {
					stale[k.Topic] = true
				}
				l.Lines.LogPartition(l.Log, k, err)
			}
		})
	}
	wg.Wait()
	maps.Copy(l.brokers, renewed)
	for addr := range failed {
		l.drop(addr)
	}
	if len(stale) > 0 && ctx.Err() == nil {
		_ = l.lookUp(ctx, slices.Sorted(maps.Keys(stale)))
	}
	return got
}

// request is a ListOffsets request for the ends of ks, at the client's
// isolation level (sent from ListOffsets v2, Kafka 0.11, on).
func (l *Lister) request(ks []Partition) *sarama.OffsetRequest {
	req := sarama.NewOffsetRequest(l.cfg.Version)
	req.IsolationLevel = l.cfg.Consumer.IsolationLevel
	for _, k := range ks {
		req.AddBlock(k.Topic, k.Part, sarama.OffsetNewest, 1)
	}
	return req
}

// leaderMoved reports whether err, a partition's answer, says that the
// broker asked does not lead the partition (now), or that its leader is
// not known yet.
func leaderMoved(err sarama.KError) bool {
	switch err {
	case sarama.ErrNotLeaderForPartition, sarama.ErrLeaderNotAvailable,
		sarama.ErrUnknownTopicOrPartition, sarama.ErrFencedLeaderEpoch:
		return true
	}
	return false
}

// open returns the listing's connection to the broker at addr.
func (l *Lister) open(addr string) (*sarama.Broker, error) {
	if b := l.brokers[addr]; b != nil {
		return b, nil
	}
	b := sarama.NewBroker(addr)
	if err := b.Open(l.cfg); err != nil {
		return nil, err
	}
	l.brokers[addr] = b
	return b, nil
}

// drop closes the listing's connection to the broker at addr.
func (l *Lister) drop(addr string) {
	if b := l.brokers[addr]; b != nil {
		_ = b.Close()
		delete(l.brokers, addr)
	}
}

// lookUp asks one broker, of those the listing is connected to, else of
// those the client knows (on a new connection), for the metadata of
// topics within ctx, keeps the leaders it names for their partitions,
// and logs its failure.
func (l *Lister) lookUp(ctx context.Context, topics []string) error {
	slices.Sort(topics)
	err := l.ask(ctx, topics)
	if err != nil {
		l.Lines.LogLookup(l.Log, topics, l.clean(err))
	}
	return err
}

// ask is lookUp's request: it keeps the leaders of the answer, or
// returns why it had none.
func (l *Lister) ask(ctx context.Context, topics []string) error {
	// A connection kept from the listing before may have ended
	// meanwhile (a broker closes one idle past its
	// connections.max.idle.ms): its broker is asked again on a new one.
	addrs := slices.Sorted(maps.Keys(l.brokers))
	for _, b := range l.Client.Brokers() {
		addrs = append(addrs, b.Addr())
	}
	var err error
	for _, addr := range addrs {
		if ctx.Err() != nil {
			break
		}
		var b *sarama.Broker
		if b, err = l.open(addr); err != nil {
			continue
		}
		var resp *sarama.MetadataResponse
		if resp, err = b.GetMetadata(sarama.NewMetadataRequest(l.cfg.Version, topics)); err != nil {
			l.drop(addr)
			continue
		}
		l.learn(resp)
		return nil
	}
	switch cause := context.Cause(ctx); {
	case cause != nil && err != nil:
		return fmt.Errorf("%w (%w)", cause, err)
	case cause != nil:
		return cause
	case err == nil:
		return errors.New("no broker known")
	}
	return err
}

// learn keeps the leaders resp names for the partitions of its topics,
// and forgets those of the partitions of its topics it names none for
// (all of a topic it answers an error for: one deleted, or that the
// client may not describe); it keeps the errors it answers for topics.
func (l *Lister) learn(resp *sarama.MetadataResponse) {
	addrs := make(map[int32]string, len(resp.Brokers))
	for _, b := range resp.Brokers {
		addrs[b.ID()] = b.Addr()
	}
	if l.leaders == nil {
		l.leaders = make(map[Partition]string)
	}
	if l.topicErrs == nil {
		l.topicErrs = make(map[string]error)
	}
	for _, t := range resp.Topics {
		if errors.Is(t.Err, sarama.ErrNoError) {
			delete(l.topicErrs, t.Name)
		} else {
			l.topicErrs[t.Name] = t.Err
		}
		maps.DeleteFunc(l.leaders, func(k Partition, _ string) bool { return k.Topic == t.Name })
		for _, p := range t.Partitions {
			if addr, ok := addrs[p.Leader]; ok && errors.Is(p.Err, sarama.ErrNoError) {
				l.leaders[Partition{t.Name, p.ID}] = addr
			}
		}
	}
}

// Close closes the listing's connections; the next listing connects
// again.
func (l *Lister) Close() {
	for _, b := range l.brokers {
		_ = b.Close()
	}
	if l.conns != nil {
		l.conns.Cut()
	}
	l.conns, l.brokers = nil, nil
}

// clean is err as Clean rewrites it.
func (l *Lister) clean(err error) error {
	if l.Clean == nil {
		return err
	}
	return l.Clean(err)
}
