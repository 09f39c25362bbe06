package kafkatopology

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/kafkaalone"
	"github.com/boulevard-go/boulevard/internal/kafkaconn"
	"github.com/boulevard-go/boulevard/internal/kafkaends"
	"github.com/boulevard-go/boulevard/internal/kafkaoffset"
	"github.com/boulevard-go/boulevard/internal/kafkaorder"
	"github.com/boulevard-go/boulevard/internal/liveset"
	"github.com/boulevard-go/boulevard/internal/redact"
	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// ErrAdmin wraps a failure to create a topic or to commit a group's
// starting offsets.
var ErrAdmin = errors.New("kafkatopology: administrative request failed")

// ErrConnect wraps a failure to connect to the cluster.
var ErrConnect = errors.New("kafkatopology: cannot connect")

// ErrMetadata wraps a failure to learn the partitions of a topic a letter
// is produced to (Publish, Hold, Requeue, DeadLetter, a release): the
// cluster did not answer within the operation's context and
// Options.AdminTimeout (the error then wraps the context's error too), or
// does not know the topic. Nothing was produced.
var ErrMetadata = errors.New("kafkatopology: topic partitions unknown")

// ErrLetterTooLarge is wrapped by [*LetterTooLargeError].
var ErrLetterTooLarge = errors.New("kafkatopology: letter too large to hold and dead-letter")

// LetterTooLargeError is the error of a Publish whose record, with the
// headers a hold or a dead-lettering adds to it later (the letter's
// history, the hold's due time and destination, its Death), would be
// larger than the producer takes (sarama's Producer.MaxMessageBytes, 1 MiB
// by default): such a letter could be delivered but neither held nor
// dead-lettered, and its failures would stop its partition's commits for
// good. Nothing was produced. It is also the error of a Publish, Hold,
// Requeue or DeadLetter whose record is larger than the producer takes
// (Reserve 0: a record another producer wrote to the main topic, which
// no reserve kept small enough), or than the broker takes (Broker: the
// topic's max.message.bytes), and the failure of a release that the
// broker refuses so (see [Stall]). It wraps [ErrLetterTooLarge] and
// sarama.ErrMessageSizeTooLarge.
type LetterTooLargeError struct {
	// Topic is the Kafka topic the letter was produced to.
	Topic string
	// Size is the record's size as the producer counts it
	// (sarama.ProducerMessage.ByteSize): its value, key and headers and
	// the most a record's framing takes.
	Size int
	// Reserve is what the topology keeps under Limit for the headers a
	// hold or a dead-lettering adds (see the package documentation,
	// Mapping): Publish takes a letter of at most Limit-Reserve bytes.
	// It is 0 for a record refused as it is.
	Reserve int
	// Limit is the producer's Producer.MaxMessageBytes or, when Broker,
	// the topic's max.message.bytes as the cluster described it at the
	// refusal (kept a minute per topic); 0 when it is unknown: it could not
	// be read, or it does not explain the refusal (a record batch holding
	// the record alone would be within it: the setting changed since it
	// was read).
	Limit int
	// Broker reports that the broker refused the record
	// (MESSAGE_TOO_LARGE), not the producer.
	Broker bool
}

// Error names the topic, the record's size, the reserve and the limit.
func (e *LetterTooLargeError) Error() string {
	switch {
	case e.Limit == 0:
		return fmt.Sprintf("kafkatopology: letter of %d bytes refused by topic %q: the broker refused it as larger than the topic's max.message.bytes, whose value is unknown",
			e.Size, e.Topic)
	case e.Broker:
		return fmt.Sprintf("kafkatopology: letter of %d bytes refused by topic %q: the broker takes at most %d bytes (the topic's max.message.bytes)",
			e.Size, e.Topic, e.Limit)
	case e.Reserve == 0:
		return fmt.Sprintf("kafkatopology: letter of %d bytes refused by topic %q: larger than Producer.MaxMessageBytes %d",
			e.Size, e.Topic, e.Limit)
	}
	return fmt.Sprintf("kafkatopology: letter of %d bytes refused by topic %q: a letter takes at most %d bytes (Producer.MaxMessageBytes %d less %d kept for the headers of a hold or a dead-lettering)",
		e.Size, e.Topic, e.Limit-e.Reserve, e.Limit, e.Reserve)
}

// Unwrap returns ErrLetterTooLarge and sarama.ErrMessageSizeTooLarge.
func (e *LetterTooLargeError) Unwrap() []error {
	return []error{ErrLetterTooLarge, sarama.ErrMessageSizeTooLarge}
}

// Backend is the Kafka topology backend. Create it with [New] and Close it
// when done; it is safe for concurrent use.
type Backend[T any] struct {
	opts   Options[T]
	cfg    *sarama.Config
	red    redact.Secrets // cfg's credentials, taken out of every error and log line
	log    *slog.Logger   // Options.Logger, redacting red
	client sarama.Client
	admin  sarama.ClusterAdmin
	prod   sarama.SyncProducer
	// alone sends each record in a request of its own, on a client of its
	// own: a record of a batch the broker refused as too large, sent again
	// (see deliver).
	alone   sarama.SyncProducer
	rr      atomic.Uint32 // round-robin partition choice
	pauses  atomic.Uint64 // how many times a releaser paused a partition
	resumes atomic.Uint64 // and resumed it
	// skippedHolds counts the hold records the releasers skipped and
	// committed past because they carry no valid due time, topic and group.
	skippedHolds atomic.Uint64
	// holdEnds are the ends of the hold partitions the backend held
	// letters in (Stats.Holds).
	holdEnds holdEnds
	// ends are the log ends of the partitions the readers and releasers
	// read, listed every Options.HighWaterInterval by a goroutine of the
	// backend until stopEnds is closed; endsDone is closed once it has
	// returned (nil both for a Backend New did not make).
	ends     kafkaends.Ends
	stopEnds chan struct{}
	endsDone chan struct{}
	// limits are the max.message.bytes of the topics whose broker refused
	// a record as too large (see topicLimit).
	limits topicLimits

	// conns are the connections of every client of the backend, its
	// readers' and releasers' included (theirs dial through it): cut when
	// Close's context ends before the closing is done.
	conns   *kafkaconn.Set
	closing liveset.Closing

	prodMu     sync.RWMutex // held shared while producing, exclusively to close
	prodClosed bool

	// stopped is set by Close, and by crash before it: from then on
	// nothing is produced, so nothing is published, released, held,
	// requeued or dead-lettered (topology.ErrClosed).
	stopped atomic.Bool

	mu        sync.Mutex
	closed    bool
	releasers map[string]*releaser[T]
	readers   map[closer]struct{}
	// calls are the Declare and Subscribe calls under way (bounded), each
	// on a goroutine that ends soon after its caller's context does, and
	// the offsets asked through client (offsets), which end within
	// sarama's timeouts or when Close cuts conns; the closing waits for
	// them. Added to under mu while not closed.
	calls sync.WaitGroup
}

// closer is what the backend closes with itself: a reader or a releaser.
// shut starts its closing (once) and returns a channel closed when it is
// done.
type closer interface{ shut() <-chan struct{} }

// New validates opts, connects to the cluster and starts the producer.
// It returns a validate.Errors for invalid options, or an error wrapping
// ErrConnect when no bootstrap broker answers within
// Options.ConnectTimeout, or when the cluster refuses an idempotent
// producer its producer id (the error then wraps
// sarama.ErrClusterAuthorizationFailed too and says which permissions to
// grant, or how to turn idempotence off). It is NewContext with context.Background().
func New[T any](opts Options[T]) (*Backend[T], error) {
	return NewContext(context.Background(), opts)
}

// NewContext is New with ctx's deadline bounding the first contact with
// the cluster as well as Options.ConnectTimeout does: every bootstrap
// broker is dialled at once and asked for its API versions, each step
// within the sooner of the two. When no broker has answered by the
// deadline, or ctx has ended by the time one answered, it returns an
// error wrapping ErrConnect and ctx.Err(); the error names every broker
// with its cause. ctx also bounds what follows the first contact (the
// client's metadata, the admin's and the producer's first requests): when
// it ends while they wait for the cluster, the connections are cut and
// NewContext returns an error wrapping ErrConnect and ctx.Err(). The
// backend made keeps Options.ConnectTimeout for its later connections. A
// ctx cancelled without a deadline is seen once the first contact ends,
// within a few Options.ConnectTimeout.
// A nil ctx returns topology.ErrNilContext, nothing connected.
func NewContext[T any](ctx context.Context, opts Options[T]) (*Backend[T], error) {
	if ctx == nil {
		return nil, topology.ErrNilContext
	}
	opts = opts.WithDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConnect, err)
	}
	cfg := opts.saramaConfig()
	red := redact.SaramaSecrets(cfg)
	if err := kafkaconn.Probe(ctx, ErrConnect, opts.Brokers, cfg, opts.ConnectTimeout, red.Err); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConnect, err)
	}
	// After the probe, which dials with shortened timeouts of its own.
	conns := kafkaconn.New(cfg)
	conns.Use(cfg)
	// Once Close has cut the connections, sarama's retries (the
	// coordinator lookups of a group's committed offsets, its join and
	// its leave), which then fail at once, must not sleep their backoff
	// between attempts. The readers' and releasers' clients copy cfg, and
	// with it these backoffs.
	conns.SkipBackoffsOnceCut(cfg)
	// The client's first requests (its metadata, the admin's controller)
	// take no context: when ctx ends first, the connections are cut, so
	// that they fail at once.
	stop := conns.CutWhenDone(ctx)
	client, admin, prod, alone, err := connect(opts.Brokers, cfg, red)
	if !stop() {
		if err == nil {
			_ = alone.Close()
			_ = prod.Close()
			_ = admin.Close()
		}
		return nil, fmt.Errorf("%w: %w", ErrConnect, ctx.Err())
	}
	if err != nil {
		return nil, err
	}
	b := &Backend[T]{opts: opts, cfg: cfg, red: red, log: slog.New(redact.Handler(opts.Logger.Handler(), red)), client: client, admin: admin, prod: prod, alone: alone, conns: conns,
		releasers: map[string]*releaser[T]{}, readers: map[closer]struct{}{},
		stopEnds: make(chan struct{}), endsDone: make(chan struct{})}
	go func() {
		defer close(b.endsDone)
		b.listEnds(b.stopEnds)
	}()
	return b, nil
}

// Name returns "kafka".
func (b *Backend[T]) Name() string { return "kafka" }

// String describes the backend by its options, credentials left out (see
// Options.String).
func (b *Backend[T]) String() string {
	if b == nil {
		return "kafkatopology.Backend(nil)"
	}
	return "kafkatopology.Backend(" + b.opts.String() + ")"
}

// GoString is String: the backend's fields hold Config's credentials.
func (b *Backend[T]) GoString() string { return b.String() }

// Format writes String for every verb (quoted for %q), so that no verb
// reaches the backend's fields.
func (b *Backend[T]) Format(f fmt.State, verb rune) { redact.Format(f, verb, b.String()) }

// LogValue logs what String shows.
func (b *Backend[T]) LogValue() slog.Value { return slog.StringValue(b.String()) }

// MarshalJSON encodes String.
func (b *Backend[T]) MarshalJSON() ([]byte, error) { return json.Marshal(b.String()) }

// kafkaName is the Kafka topic of a topology name.
func kafkaName(name string) string { return kafkatopic.KafkaTopic(topic.Name(name)) }

// connect makes the backend's shared client, its admin, its producer and
// its single-record producer (with a client of its own). Both clients take
// kafkaorder.Producer(cfg): one request at a time on each connection, and
// an idempotent producer where cfg allows it.
func connect(brokers []string, cfg *sarama.Config, red redact.Secrets) (sarama.Client, sarama.ClusterAdmin, sarama.SyncProducer, sarama.SyncProducer, error) {
	cfg = kafkaorder.Producer(cfg)
	client, err := sarama.NewClient(brokers, cfg)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("%w: brokers %q: %w", ErrConnect, brokers, red.Err(err))
	}
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		_ = client.Close()
		return nil, nil, nil, nil, fmt.Errorf("%w: %w", ErrConnect, red.Err(err))
	}
	prod, err := sarama.NewSyncProducerFromClient(client)
	if err != nil {
		_ = admin.Close()
		return nil, nil, nil, nil, kafkaorder.StartError(ErrConnect, idempotenceOff, red.Err(err))
	}
	aloneClient, err := sarama.NewClient(brokers, kafkaalone.Config(cfg, resentCopy))
	if err != nil {
		_ = prod.Close()
		_ = admin.Close()
		return nil, nil, nil, nil, fmt.Errorf("%w: brokers %q: %w", ErrConnect, brokers, red.Err(err))
	}
	alone, err := sarama.NewSyncProducerFromClient(aloneClient)
	if err != nil {
		_ = aloneClient.Close()
		_ = prod.Close()
		_ = admin.Close()
		return nil, nil, nil, nil, kafkaorder.StartError(ErrConnect, idempotenceOff, fmt.Errorf("brokers %q: %w", brokers, red.Err(err)))
	}
	return client, admin, prod, ownClient{alone, aloneClient}, nil
}

// idempotenceOff says how the options turn the producers' idempotence
// off.
const idempotenceOff = "Config.Producer.Retry.Max 0"

// ownClient is a producer made on a client of its own, which its Close
// closes too.
type ownClient struct {
	sarama.SyncProducer
	client sarama.Client
}

// Close closes the producer, then its client.
func (p ownClient) Close() error {
	return errors.Join(p.SyncProducer.Close(), p.client.Close())
}

// resentCopy reports that a record the single-record producer is handed
// skips its interceptors: it is a copy of one the producer already passed
// through them (see deliver).
func resentCopy(*sarama.ProducerMessage) bool { return true }

// Declare creates the main topic, the hold topics and the DLQ that do not
// exist (a hold topic keeping its letters their delay plus
// Options.HoldRetentionMargin, a DLQ Options.DLQRetention, forever by
// default), checks the retention of the hold topics and DLQ that exist
// (a *RetentionError wrapping ErrRetentionTooShort for one that can
// delete letters before they are released or replayed; see the package
// documentation, Mapping), logs a WARN for each of its topics whose
// max.message.bytes is below Producer.MaxMessageBytes (read in the same
// request; letters between the two fail their publish or hand-off
// there), commits the consumer group's starting offsets
// on the main topic where it has none (the log end, or the oldest record
// with Options.InitialOffset earliest; a committed offset is never moved),
// and starts a releaser for each hold topic this backend does not release
// yet. ctx and Options.AdminTimeout
// bound it: it returns by the first of their deadlines, with an error
// wrapping ErrAdmin and the context's error when the cluster has not
// answered by then (see the package documentation, Bounded calls). A nil
// Backend returns topology.ErrClosed, as a closed one does.
// A Backend New did not make returns an error wrapping
// topic.ErrNotCreated at once, and topology.ErrClosed once closed.
// A nil ctx returns topology.ErrNilContext, nothing declared.
func (b *Backend[T]) Declare(ctx context.Context, t *topology.Topology) (topology.Queues[T], error) {
	if ctx == nil {
		return nil, topology.ErrNilContext
	}
	if b == nil {
		return nil, topology.ErrClosed
	}
	if t == nil {
		return nil, errors.New("kafkatopology: Declare with a nil topology")
	}
	if b.cfg == nil { // a Backend New did not make
		if liveset.Closed(&b.mu, &b.closed) {
			return nil, topology.ErrClosed
		}
		return nil, errZeroBackend
	}
	ctx, cancel := context.WithTimeout(ctx, b.opts.AdminTimeout)
	defer cancel()
	q := &queues[T]{b: b, t: t, main: kafkaName(t.Name()), group: t.ConsumerGroup()}
	q.reserve = historyReserve(q.main, t)
	return bounded(ctx, b, ErrAdmin, fmt.Sprintf("declaring topology %q", t.Name()), func(d *dialing) (topology.Queues[T], error) {
		if err := b.declare(ctx, d, q); err != nil {
			return nil, err
		}
		return q, nil
	})
}

// errZeroBackend is what Declare returns on a Backend New did not make,
// until it is closed.
var errZeroBackend = fmt.Errorf("kafkatopology: zero Backend (make one with New): %w", topic.ErrNotCreated)

// declare does Declare's work with a client of its own, which dials
// through d, and makes the releasers through d too.
func (b *Backend[T]) declare(ctx context.Context, d *dialing, q *queues[T]) error {
	cfg, _ := d.child(b.cfg)
	client, err := sarama.NewClient(b.opts.Brokers, cfg)
	if err != nil {
		return fmt.Errorf("%w: brokers %q: %w", ErrConnect, b.opts.Brokers, b.red.Err(err))
	}
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		_ = client.Close()
		return fmt.Errorf("%w: %w", ErrConnect, b.red.Err(err))
	}
	defer admin.Close() // closes client too
	t := q.t
	mainParts := b.opts.Partitions
	if _, seq := t.Sequenced(); seq {
		mainParts = int32(t.RoutingShards())
	}
	if _, err := b.ensureTopic(ctx, client, admin, q.main, mainParts, nil); err != nil {
		return err
	}
	var existing []kept // the hold topics and DLQ that were there already
	for _, h := range t.Holds() {
		name := kafkaName(h.Name)
		had, err := b.ensureTopic(ctx, client, admin, name, b.opts.Partitions, b.holdConfig(h.Delay))
		if err != nil {
			return err
		}
		if had {
			existing = append(existing, kept{topic: name, delay: h.Delay})
		}
		q.holds = append(q.holds, hold{name: name, delay: h.Delay})
	}
	if dlq, ok := t.DLQ(); ok {
		q.dlq = kafkaName(dlq)
		had, err := b.ensureTopic(ctx, client, admin, q.dlq, b.opts.Partitions, b.dlqConfig())
		if err != nil {
			return err
		}
		if had {
			existing = append(existing, kept{topic: q.dlq})
		}
	}
	if err := b.checkConfigs(ctx, admin, q.topics(), existing); err != nil {
		return err
	}
	if !t.IsBroadcast() {
		if err := b.startOffsets(ctx, client, admin, q.main, q.groupID()); err != nil {
			return err
		}
	}
	var made []*releaser[T]
	for _, h := range q.holds {
		if b.releasing(h.name) {
			continue
		}
		r, err := newReleaser(b, d, h.name, h.delay)
		if err != nil {
			discard(made)
			return err
		}
		made = append(made, r)
	}
	// The backend's shared client produces to these topics: it learns of
	// them now, as the declaration's own client did, rather than at the
	// first publish (a best effort: a publish refreshes what it lacks).
	_ = b.client.RefreshMetadata(q.topics()...)
	if !d.settle() {
		discard(made)
		return errCutShort
	}
	return b.keepReleasers(made)
}

// ensureTopic creates kname with parts partitions and the configuration
// configs (nil: the broker's defaults) unless it exists, then waits until
// client's metadata shows it. It reports whether kname existed already
// (its configuration is then its own).
func (b *Backend[T]) ensureTopic(ctx context.Context, client sarama.Client, admin sarama.ClusterAdmin, kname string, parts int32, configs map[string]*string) (existed bool, err error) {
	err = admin.CreateTopic(kname, &sarama.TopicDetail{NumPartitions: parts, ReplicationFactor: b.opts.ReplicationFactor, ConfigEntries: configs}, false)
	existed = errors.Is(err, sarama.ErrTopicAlreadyExists)
	if err != nil && !existed {
		return false, fmt.Errorf("%w: creating topic %q: %w", ErrAdmin, kname, b.red.Err(err))
	}
	err = kafkaoffset.Poll(ctx, func() (bool, error) {
		if err := client.RefreshMetadata(kname); err != nil {
			return false, err
		}
		ps, err := client.Partitions(kname)
		return err == nil && len(ps) > 0, err
	})
	if err != nil {
		return existed, fmt.Errorf("%w: topic %q not visible in the cluster metadata: %w", ErrAdmin, kname, b.red.Err(err))
	}
	return existed, nil
}

// The lines Declare logs when it starts a new group on a main topic that
// holds records.
const (
	msgStartAtEnd    = "kafkatopology: a new consumer group starts at the log end of its main topic; the records before it are not delivered to the group (Options.InitialOffset earliest delivers them)"
	msgStartAtOldest = "kafkatopology: a new consumer group starts at the oldest record of its main topic; the records already there are delivered to the group"
)

// startOffsets commits, as group gid's offset on every partition of kname
// without a committed offset, the log end or, with Options.InitialOffset
// earliest, the log start, outside any group generation (accepted while
// the group has no member), and logs one INFO line when records precede
// the log end there. If the commit is refused (members elsewhere got there
// first), the partitions without an offset start at the oldest record:
// nothing is missed either way.
func (b *Backend[T]) startOffsets(ctx context.Context, client sarama.Client, admin sarama.ClusterAdmin, kname, gid string) error {
	at, msg := int64(sarama.OffsetNewest), msgStartAtEnd
	if b.opts.InitialOffset == kafka.OffsetEarliest {
		at, msg = sarama.OffsetOldest, msgStartAtOldest
	}
	start, err := kafkaoffset.StartOffsets(ctx, client, admin, kname, gid, at, b.cfg.Version)
	if err != nil {
		return fmt.Errorf("%w: group %q on topic %q: %w", ErrAdmin, gid, kname, b.red.Err(err))
	}
	if start.Refused != nil {
		b.log.Warn("kafkatopology: the starting offsets of a consumer group were refused; partitions without a committed offset start at the oldest record",
			slog.String("topic", kname), slog.String("group", gid), slog.Any("error", start.Refused))
	}
	if start.Backlog > 0 {
		b.log.Info(msg, slog.String("topic", kname), slog.String("group", gid), slog.Int64("records", start.Backlog))
	}
	return nil
}

// partition chooses the partition of a record to kname: the shard's for a
// sequenced letter, round-robin otherwise. It reads the partitions from
// the shared client's metadata when that has them (the producer then finds
// them there too); otherwise it asks the cluster through the shared client
// (see lookUpPartitions), within ctx and Options.AdminTimeout.
func (b *Backend[T]) partition(ctx context.Context, kname string, shard int, sequenced bool) (int32, error) {
	var ps []int32
	var err error
	if b.client.PartitionNotReadable(kname, 0) {
		ps, err = b.lookUpPartitions(ctx, kname)
	} else if ps, err = b.client.Partitions(kname); err != nil {
		err = fmt.Errorf("%w: topic %q: %w", ErrMetadata, kname, b.red.Err(err))
	}
	if err != nil {
		return 0, err
	}
	if len(ps) == 0 {
		return 0, fmt.Errorf("%w: topic %q: %w", ErrMetadata, kname, sarama.ErrUnknownTopicOrPartition)
	}
	if sequenced {
		return shardPartition(ps, shard), nil
	}
	return ps[int(b.rr.Add(1))%len(ps)], nil
}

// shardPartition is the partition, of a sequenced topic's partitions
// ps (not empty), that routing shard's letters go to.
func shardPartition(ps []int32, shard int) int32 {
	return ps[shard%len(ps)]
}

// lookUpPartitions asks the cluster for kname's partitions through the
// shared client, whose requests take no context (a metadata request waits
// up to Net.ReadTimeout, with Metadata.Retry retries): it asks on a
// goroutine of the backend and returns by ctx's deadline or
// Options.AdminTimeout, whichever is sooner, with an error wrapping
// ErrMetadata and the context's error when the cluster has not answered
// by then (see bounded). What it left asking ends within sarama's
// timeouts, or at once when the backend's Close cuts its connections; the
// closing waits for it.
func (b *Backend[T]) lookUpPartitions(ctx context.Context, kname string) ([]int32, error) {
	ctx, cancel := context.WithTimeout(ctx, b.opts.AdminTimeout)
	defer cancel()
	return bounded(ctx, b, ErrMetadata, fmt.Sprintf("the partitions of topic %q", kname), func(*dialing) ([]int32, error) {
		ps, err := b.client.Partitions(kname)
		if err != nil {
			return nil, fmt.Errorf("%w: topic %q: %w", ErrMetadata, kname, b.red.Err(err))
		}
		return ps, nil
	})
}

// offsets returns the offsets of kname's partitions parts at time at
// (sarama.OffsetNewest, the log end, or sarama.OffsetOldest), asked
// through the backend's shared client, whose requests take no context: it
// asks on a goroutine of the backend and returns by ctx's deadline (see
// bounded), with an error wrapping ErrAdmin and ctx.Err() when the
// cluster has not answered by then. The requests left running end within
// sarama's timeouts, or at once when the backend's Close cuts its
// connections; its closing waits for them. The map holds the partitions
// whose offset was had, even when others failed (their errors joined).
func (b *Backend[T]) offsets(ctx context.Context, kname string, parts []int32, at int64) (map[int32]int64, error) {
	return bounded(ctx, b, ErrAdmin, fmt.Sprintf("asking the offsets of topic %q", kname), func(*dialing) (map[int32]int64, error) {
		offs := make(map[int32]int64, len(parts))
		var errs []error
		for _, p := range parts {
			off, err := b.client.GetOffset(kname, p, at)
			if err != nil {
				errs = append(errs, fmt.Errorf("kafkatopology: offset of topic %q partition %d: %w", kname, p, b.red.Err(err)))
				continue
			}
			offs[p] = off
		}
		return offs, errors.Join(errs...)
	})
}

// deliver produces msg and waits for the broker's acknowledgement, and
// returns the record produced. The producer batches the records sent at
// the same time (other hand-offs, releases) up to its
// Producer.MaxMessageBytes, and the broker refuses the whole batch when it
// is over the topic's max.message.bytes: when it refused msg's batch as
// too large while msg alone fits the topic's max.message.bytes (or that
// is not known), a copy of msg is sent again in a request of its own, and
// that copy is the record produced. The topic's max.message.bytes is read
// (see topicLimit) only after such a refusal, bounded by ctx and
// Options.AdminTimeout. A record refused as too large is a
// *LetterTooLargeError (see send, withTopicLimit).
func (b *Backend[T]) deliver(ctx context.Context, msg *sarama.ProducerMessage) (*sarama.ProducerMessage, error) {
	err := b.send(msg)
	var tl *LetterTooLargeError
	if errors.As(err, &tl) && tl.Broker {
		if limit := b.topicLimit(ctx, tl.Topic); limit == 0 || tl.Size+batchHeader <= limit {
			msg = resent(msg)
			err = b.sendThrough(b.alone, msg)
		}
	}
	return msg, b.withTopicLimit(ctx, err)
}

// resent returns a copy of msg to send again: msg is left to the producer
// that failed it. It is the record as that producer's interceptors left
// it, and the single-record producer's skip it (resentCopy).
func resent(msg *sarama.ProducerMessage) *sarama.ProducerMessage {
	return &sarama.ProducerMessage{Topic: msg.Topic, Key: msg.Key, Value: msg.Value, Headers: msg.Headers,
		Partition: msg.Partition, Timestamp: msg.Timestamp}
}

// send produces msg through the backend's producer (see sendThrough).
func (b *Backend[T]) send(msg *sarama.ProducerMessage) error { return b.sendThrough(b.prod, msg) }

// sendThrough produces msg through p and waits for the broker's
// acknowledgement. A record the producer or the broker refuses as too
// large is a *LetterTooLargeError; the broker's limit is not in it yet
// (see withTopicLimit).
func (b *Backend[T]) sendThrough(p sarama.SyncProducer, msg *sarama.ProducerMessage) error {
	b.prodMu.RLock()
	defer b.prodMu.RUnlock()
	if b.prodClosed || b.stopped.Load() {
		return topology.ErrClosed
	}
	_, _, err := p.SendMessage(msg)
	if errors.Is(err, sarama.ErrOutOfOrderSequenceNumber) {
		// The broker stored nothing: it has no sequence of the producer's
		// for the partition (a topic deleted and created again), and the
		// producer has begun a new epoch, whose sequences start at 0.
		_, _, err = p.SendMessage(msg)
	}
	if err != nil {
		if errors.Is(err, sarama.ErrMessageSizeTooLarge) {
			tl := &LetterTooLargeError{Topic: msg.Topic, Size: msg.ByteSize(2), Broker: true}
			if limit := b.cfg.Producer.MaxMessageBytes; tl.Size > limit {
				tl.Limit, tl.Broker = limit, false // refused by the producer
			}
			return b.refused(tl)
		}
		return b.refused(fmt.Errorf("kafkatopology: producing to topic %q: %w", msg.Topic, b.red.Err(err)))
	}
	return nil
}

// refused returns err, a failure to produce or to choose a partition,
// wrapped in topology.ErrClosed once the backend has stopped: the closing
// (the producer's and the client's, or connections cut at Close's
// deadline) is then what made it fail.
func (b *Backend[T]) refused(err error) error {
	if b.stopped.Load() && !errors.Is(err, topology.ErrClosed) {
		return fmt.Errorf("%w: %w", topology.ErrClosed, err)
	}
	return err
}

// releasing reports whether hold topic kname has its releaser.
func (b *Backend[T]) releasing(kname string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.releasers[kname] != nil
}

// keepReleasers registers and starts the releasers a declaration made,
// but those whose hold topic got one meanwhile (from a declaration running
// at the same time), which it closes; once the backend is closed it
// closes them all and returns topology.ErrClosed.
func (b *Backend[T]) keepReleasers(rs []*releaser[T]) error {
	var extra []*releaser[T]
	b.mu.Lock()
	closed := b.closed
	for _, r := range rs {
		if closed || b.releasers[r.topic] != nil {
			extra = append(extra, r)
			continue
		}
		b.releasers[r.topic] = r
		r.start()
	}
	b.mu.Unlock()
	discard(extra)
	if closed {
		return topology.ErrClosed
	}
	return nil
}

// track registers a reader to close with the backend; false when closed.
func (b *Backend[T]) track(c closer) bool { return liveset.Add(&b.mu, &b.closed, b.readers, c) }

func (b *Backend[T]) untrack(c closer) { liveset.Remove(&b.mu, b.readers, c) }

// Close refuses every produce from the call on (Publish, Hold, Requeue
// and DeadLetter return an error wrapping topology.ErrClosed at once, and
// so does one under way that fails meanwhile), stops the releasers (what
// they hold stays in the hold topics), closes every reader (each commits
// what was settled and leaves its group), then the producer and the
// clients. It returns nil once all of
// that is done. If ctx ends first it returns an error wrapping ctx.Err()
// and cuts every connection of the backend's clients, its readers' and
// releasers' included, so that the closing, which goes on in the
// background, ends at once instead of waiting for brokers that do not
// answer (sarama waits up to Net.ReadTimeout for each request; its
// retries, which then fail at once, wait no backoff): commits
// not yet made are then lost, and their letters delivered again.
// Idempotent: a later call waits, within its own ctx, for the same
// closing. Close of a nil Backend returns nil, and so does that of one
// New did not make.
// A nil ctx returns topology.ErrNilContext and leaves the backend as it
// was, open: call Close again with a context.
func (b *Backend[T]) Close(ctx context.Context) error {
	if ctx == nil {
		return topology.ErrNilContext
	}
	if b == nil {
		return nil
	}
	b.stopped.Store(true)
	b.mu.Lock()
	b.closed = true // Declare, Subscribe and the releasers refuse at once
	b.mu.Unlock()
	return await(ctx, b.closing.Start(b.close), b.conns.Cut, "the backend")
}

func (b *Backend[T]) close() {
	if b.stopEnds != nil {
		// The listing under way, if any, is cut short at once, and
		// waited for once the readers are closed.
		close(b.stopEnds)
	}
	b.calls.Wait() // Close's cut, at its deadline, ends them too
	b.mu.Lock()
	rs := make([]closer, 0, len(b.readers)+len(b.releasers))
	for r := range b.readers {
		rs = append(rs, r)
	}
	for _, r := range b.releasers {
		rs = append(rs, r)
	}
	b.mu.Unlock()
	dones := make([]<-chan struct{}, len(rs))
	for i, r := range rs {
		dones[i] = r.shut()
	}
	for _, d := range dones {
		<-d
	}
	if b.endsDone != nil {
		<-b.endsDone
	}
	b.prodMu.Lock()
	b.prodClosed = true
	if b.prod == nil {
		b.prodMu.Unlock()
		return // New did not make the backend: it has no producer or clients
	}
	_ = b.prod.Close()
	_ = b.alone.Close()
	b.prodMu.Unlock()
	_ = b.admin.Close() // closes b.client too
}

// crash stops the backend as a crash would stop the process: from the
// call on nothing is produced (no release, hold, requeue or
// dead-lettering, whose letters are then left uncommitted), and once the
// produces under way are acknowledged the backend closes within ctx, its
// readers committing what was settled. A real crash can also lose commits
// not yet sent, which only delivers more letters again.
func (b *Backend[T]) crash(ctx context.Context) error {
	b.stopped.Store(true)
	// Wait for the produces under way before Close lets the readers commit.
	b.prodMu.Lock()
	//lint:ignore SA2001 the empty critical section is the wait
	b.prodMu.Unlock()
	return b.Close(ctx)
}

var _ topology.Backend[int] = (*Backend[int])(nil)
