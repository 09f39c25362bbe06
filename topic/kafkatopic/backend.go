package kafkatopic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/kafkaconn"
	"github.com/boulevard-go/boulevard/internal/kafkaends"
	"github.com/boulevard-go/boulevard/internal/kafkaoffset"
	"github.com/boulevard-go/boulevard/internal/kafkaorder"
	"github.com/boulevard-go/boulevard/internal/kafkareach"
	"github.com/boulevard-go/boulevard/internal/liveset"
	"github.com/boulevard-go/boulevard/internal/redact"
	"github.com/boulevard-go/boulevard/topic"
)

// Name is the backend's configuration name.
const Name = "kafka"

// Backend is the Kafka backend of the topic layer: each topic is a Kafka
// topic, each balanced group a Kafka consumer group, each broadcast
// subscriber a group-less consumer of every partition. Create it with
// [New]; it is safe for concurrent use. Close releases its clients.
type Backend[T any] struct {
	opts   Options[T]
	cfg    *sarama.Config
	red    redact.Secrets
	log    *slog.Logger
	client sarama.Client // metadata, offsets, the producer
	// v2 is whether records are written as record batches (magic 2,
	// Kafka 0.11 and later), which recordSize measures.
	v2    bool
	admin sarama.ClusterAdmin
	prod  *producer
	// conns are every client's connections, cut when Close's context
	// ends before the closing is done.
	conns *kafkaconn.Set

	closing liveset.Closing // what Close started
	// admins counts the administrative steps still running (bounded),
	// some of them abandoned by a call whose context ended, and the
	// Subscribes under way; close waits for them.
	admins sync.WaitGroup

	// ends are the log ends of the partitions the members claim and the
	// broadcast subscribers read, listed every Options.HighWaterInterval
	// by a goroutine of the backend until stopEnds is closed; endsDone is
	// closed once it has returned (nil both for a Backend New did not
	// make).
	ends     kafkaends.Ends
	stopEnds chan struct{}
	endsDone chan struct{}

	mu     sync.Mutex
	closed bool
	topics map[*kTopic[T]]struct{}
}

// New validates opts, connects to the cluster and starts the producer. It
// returns a [validate.Errors] for invalid options, or an error wrapping
// [ErrConnect] when no bootstrap broker answers within
// Options.ConnectTimeout, or when the cluster refuses the idempotent
// producer its producer id (the error then wraps
// sarama.ErrClusterAuthorizationFailed too and says which permissions to
// grant, or how to turn idempotence off).
func New[T any](opts Options[T]) (*Backend[T], error) {
	return NewContext(context.Background(), opts)
}

// NewContext is New with ctx's deadline bounding the first contact with
// the cluster as well as Options.ConnectTimeout does: when no bootstrap
// broker has answered by the deadline, or ctx has ended by the time one
// answered, it returns an error wrapping ctx.Err() (and [ErrConnect] when
// no broker answered). The backend made keeps Options.ConnectTimeout for
// its later connections. A ctx cancelled without a deadline is seen once
// the first contact ends, within Options.ConnectTimeout. ctx also bounds
// what follows the first contact (the clients' metadata, the admin's
// first request): when it ends while they wait for the cluster, the
// connections are cut and NewContext returns an error wrapping
// [ErrConnect] and ctx.Err().
// A nil ctx returns topic.ErrNilContext, nothing connected.
func NewContext[T any](ctx context.Context, opts Options[T]) (*Backend[T], error) {
	if ctx == nil {
		return nil, topic.ErrNilContext
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.WithDefaults()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConnect, err)
	}
	cfg := opts.saramaConfig()
	b := &Backend[T]{opts: opts, cfg: cfg, red: redact.SaramaSecrets(cfg), log: opts.Logger, topics: make(map[*kTopic[T]]struct{})}
	b.v2 = cfg.Version.IsAtLeast(sarama.V0_11_0_0)
	if err := b.probe(ctx); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConnect, err)
	}
	// After the probe, which dials with shortened timeouts of its own.
	b.conns = kafkaconn.New(cfg)
	b.conns.Use(cfg)
	// Once Close has cut the connections, sarama's retries (the
	// coordinator lookups of a group's committed offsets, its join and
	// its leave), which then fail at once, must not sleep their backoff
	// between attempts. The subscribers' clients copy cfg, and with it
	// these backoffs.
	b.conns.SkipBackoffsOnceCut(cfg)
	// The clients' first requests (their metadata, the admin's controller)
	// take no context: when ctx ends first, the connections are cut, so
	// that they fail at once.
	stop := b.conns.CutWhenDone(ctx)
	err := b.connect()
	if !stop() {
		if err == nil {
			b.prod.close()
			_ = b.admin.Close()
		}
		return nil, fmt.Errorf("%w: %w", ErrConnect, ctx.Err())
	}
	if err != nil {
		return nil, err
	}
	b.stopEnds, b.endsDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(b.endsDone)
		b.listEnds(b.stopEnds)
	}()
	return b, nil
}

// connect makes the backend's client, its admin and its producer. The
// client and the producer's own take kafkaorder.Producer(b.cfg): one
// request at a time on each connection, and an idempotent producer where
// the options allow it.
func (b *Backend[T]) connect() error {
	cfg := kafkaorder.Producer(b.cfg)
	client, err := sarama.NewClient(b.opts.Brokers, cfg)
	if err != nil {
		return fmt.Errorf("%w: brokers %q: %w", ErrConnect, b.opts.Brokers, b.red.Err(err))
	}
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		_ = client.Close()
		return fmt.Errorf("%w: %w", ErrConnect, b.red.Err(err))
	}
	prod, err := newProducer(client, b.opts.Brokers, cfg, b.opts.PublishBuffer)
	if err != nil {
		_ = admin.Close()
		return kafkaorder.StartError(ErrConnect, idempotenceOff, b.red.Err(err))
	}
	b.client, b.admin, b.prod = client, admin, prod
	return nil
}

// idempotenceOff says how the options turn the producer's idempotence
// off.
const idempotenceOff = `Acks "leader", or Config.Producer.Retry.Max 0`

// Name returns "kafka".
func (b *Backend[T]) Name() string { return Name }

// String describes the backend by its options, credentials left out (see
// Options.String).
func (b *Backend[T]) String() string {
	if b == nil {
		return "kafkatopic.Backend(nil)"
	}
	return "kafkatopic.Backend(" + b.opts.String() + ")"
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

// Capabilities declares what a Kafka topic honours: every mode; both
// on_full policies, applied to the producer's buffer (a log stores every
// publish, so no consumer group pushes back: block waits for room in the
// buffer, drop_newest drops the publish when it is full; and
// balanced.queue_capacity bounds each member's read-ahead); both on_lag
// policies, applied when a broadcast subscriber falls below the log start;
// ack_mode first; ack propagation disabled (a tracked publish would need
// the downstream outcome to travel back across processes). Features:
// durable, not group back-pressure nor broadcast capacity.
func (b *Backend[T]) Capabilities() topic.Capabilities {
	return topic.Capabilities{
		Modes:       []topic.Mode{topic.BalancedOnly, topic.BroadcastOnly, topic.Mixed},
		OnFull:      []topic.OnFull{topic.Block, topic.DropNewest},
		OnLag:       []topic.OnLag{topic.DropOldest, topic.Disconnect},
		AckModes:    []topic.AckMode{topic.AckFirst},
		Propagation: []topic.PropagationMode{topic.PropagationDisabled},
		Features:    []topic.Feature{topic.FeatureDurable},
	}
}

// KafkaTopic returns the Kafka topic name of a topic: name with each '/'
// replaced by '.', since Kafka topic names have no '/'. ("a/b" and "a.b"
// are therefore the same Kafka topic.)
func KafkaTopic(name topic.Name) string { return strings.ReplaceAll(string(name), "/", ".") }

// GroupID returns the Kafka consumer group id of balanced group g of a
// topic: "<kafka topic>:<group>". The colon appears in neither a topic nor
// a group name, so each (topic, group) pair has its own consumer group.
func GroupID(name topic.Name, g topic.GroupName) string { return KafkaTopic(name) + ":" + string(g) }

// NewTopic creates the Kafka topic if it does not exist (Options.Partitions
// partitions, Options.ReplicationFactor replicas), or checks that the
// existing one has at least Options.Partitions partitions (a
// [*PartitionsError] otherwise; more is fine), reads its max.message.bytes
// (see [RecordTooLargeError]), and returns its state. ctx and
// Options.AdminTimeout bound the requests. A nil Backend returns
// topic.ErrTopicClosed, as a closed one does. A Backend New did not make
// returns an error wrapping topic.ErrNotCreated at once, and
// topic.ErrTopicClosed once closed.
// A nil ctx returns topic.ErrNilContext, nothing declared.
func (b *Backend[T]) NewTopic(ctx context.Context, name topic.Name, opts topic.Options) (topic.State[T], error) {
	if ctx == nil {
		return nil, topic.ErrNilContext
	}
	if b == nil {
		return nil, topic.ErrTopicClosed
	}
	if b.admin == nil { // a Backend New did not make
		if liveset.Closed(&b.mu, &b.closed) {
			return nil, topic.ErrTopicClosed
		}
		return nil, errZeroBackend
	}
	ctx, cancel := context.WithTimeout(ctx, b.opts.AdminTimeout)
	defer cancel()
	kname := KafkaTopic(name)
	var limit int
	if err := b.bounded(ctx, "declaring topic "+strconv.Quote(kname), func() error {
		if err := b.ensureTopic(ctx, kname); err != nil {
			return err
		}
		limit = b.maxMessageBytes(kname)
		return nil
	}); err != nil {
		return nil, err
	}
	t := newKTopic(b, name, kname, opts, limit)
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, topic.ErrTopicClosed
	}
	b.topics[t] = struct{}{}
	b.mu.Unlock()
	return t, nil
}

// errZeroBackend is what NewTopic returns on a Backend New did not make,
// before it is closed.
var errZeroBackend = fmt.Errorf("kafkatopic: zero Backend (make one with New): %w", topic.ErrNotCreated)

// bounded runs fn, an administrative step of the backend's client, and
// returns its error, or an error wrapping ErrAdmin and ctx.Err() that
// names what when ctx ends first: sarama's requests take no context, and
// wait for a broker that does not answer up to Net.ReadTimeout each. The
// step left running ends when its requests do (immediately once Close
// cuts the connections); Close waits for it. After Close it returns
// topic.ErrTopicClosed.
func (b *Backend[T]) bounded(ctx context.Context, what string, fn func() error) error {
	if !liveset.Enter(&b.mu, &b.closed, &b.admins) {
		return topic.ErrTopicClosed
	}
	done := make(chan error, 1)
	go func() {
		defer b.admins.Done()
		done <- fn()
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%w: %s: %w", ErrAdmin, what, ctx.Err())
	}
}

// subscribing registers a Subscribe under way, which the backend's
// closing waits for (closing its topic ends it), unless the backend is
// closed: false then. The caller calls b.admins.Done once it returns.
func (b *Backend[T]) subscribing() bool { return liveset.Enter(&b.mu, &b.closed, &b.admins) }

// ensureTopic creates kname or checks its partition count, then waits
// until the client's metadata shows every partition.
func (b *Backend[T]) ensureTopic(ctx context.Context, kname string) error {
	want := b.opts.Partitions
	err := b.admin.CreateTopic(kname, &sarama.TopicDetail{NumPartitions: want, ReplicationFactor: b.opts.ReplicationFactor}, false)
	switch {
	case err == nil:
	case errors.Is(err, sarama.ErrTopicAlreadyExists):
		md, derr := b.admin.DescribeTopics([]string{kname})
		if derr != nil {
			return fmt.Errorf("%w: describing topic %q: %w", ErrAdmin, kname, b.red.Err(derr))
		}
		if len(md) != 1 || !errors.Is(md[0].Err, sarama.ErrNoError) {
			var merr error = sarama.ErrUnknownTopicOrPartition
			if len(md) == 1 {
				merr = md[0].Err
			}
			return fmt.Errorf("%w: describing topic %q: %w", ErrAdmin, kname, merr)
		}
		if have := int32(len(md[0].Partitions)); have < want {
			return &PartitionsError{Topic: kname, Have: have, Want: want}
		}
	default:
		return fmt.Errorf("%w: creating topic %q: %w", ErrAdmin, kname, b.red.Err(err))
	}
	err = kafkaoffset.Poll(ctx, func() (bool, error) {
		if err := b.client.RefreshMetadata(kname); err != nil {
			return false, err
		}
		ps, err := b.client.Partitions(kname)
		return err == nil && int32(len(ps)) >= want, err
	})
	if err != nil {
		return fmt.Errorf("%w: topic %q not visible in the cluster metadata: %w", ErrAdmin, kname, b.red.Err(err))
	}
	return nil
}

// maxMessageBytes returns kname's max.message.bytes: the largest record
// batch the brokers accept for the topic (its own setting, else the
// brokers' message.max.bytes). It returns 0, and logs why, when the
// cluster does not tell (the client may not describe the topic's
// configuration, or the protocol version is older than 0.11): the
// declaration goes on, and a record over the limit is then found when the
// broker refuses its batch.
func (b *Backend[T]) maxMessageBytes(kname string) int {
	const key = "max.message.bytes"
	var entries []sarama.ConfigEntry
	var err error
	if b.v2 {
		entries, err = b.describeTopicConfig(kname, key)
	} else {
		// DescribeConfigs came with Kafka 0.11.
		err = fmt.Errorf("protocol version %s is older than 0.11, the first to describe a topic's configuration", b.cfg.Version)
	}
	if err == nil {
		err = fmt.Errorf("%s is not in the answer", key)
		for _, e := range entries {
			if e.Name != key {
				continue
			}
			if n, perr := strconv.Atoi(e.Value); perr == nil && n > 0 {
				return n
			}
			err = fmt.Errorf("%s is %q, not a positive number", key, e.Value)
		}
	}
	b.log.Info("kafkatopic: the topic's max.message.bytes could not be read; a record over it is found when the broker refuses its batch, whose other records are then sent again one by one",
		slog.String("topic", kname), slog.Any("error", b.red.Err(err)))
	return 0
}

// describeTopicConfig returns the entries of kname's configuration named names,
// or the error the cluster answered for the topic.
func (b *Backend[T]) describeTopicConfig(kname string, names ...string) ([]sarama.ConfigEntry, error) {
	results, err := b.admin.DescribeConfigs([]*sarama.ConfigResource{{Type: sarama.TopicResource, Name: kname, ConfigNames: names}}, sarama.DescribeConfigsOptions{})
	if err != nil {
		return nil, err
	}
	var entries []sarama.ConfigEntry
	for _, r := range results {
		if r.Name != kname {
			continue
		}
		if r.ErrorCode != sarama.ErrNoError {
			return nil, &sarama.DescribeConfigError{Err: r.ErrorCode, ErrMsg: r.ErrorMsg}
		}
		entries = append(entries, r.Configs...)
	}
	return entries, nil
}

// Close closes every topic the backend created (their subscribers leave
// their groups, and a Subscribe under way on them ends), waits for the
// declarations and Subscribes under way, lets the producer finish what it
// was handed, and closes the clients. It returns nil once all are closed. If ctx ends first it
// returns an error wrapping ctx.Err() that names what is still closing,
// and cuts every connection of the backend's clients, so that the
// closing, which goes on in the background, ends at once instead of
// waiting for brokers that do not answer (sarama waits up to
// Net.ReadTimeout for each), and sarama's retries, which then fail at
// once, wait no backoff. Idempotent: a later call waits, within its
// own ctx, for the same closing. Close of a nil Backend returns nil, and
// so does that of one New did not make, whose later calls then report
// it closed.
// A nil ctx returns topic.ErrNilContext and leaves the backend as it
// was, open: call Close again with a context.
func (b *Backend[T]) Close(ctx context.Context) error {
	if ctx == nil {
		return topic.ErrNilContext
	}
	if b == nil {
		return nil
	}
	if err := liveset.Await(ctx, b.closing.Start(b.close), b.conns.Cut); err != nil {
		return fmt.Errorf("kafkatopic: closing the backend: its topics, producer and clients are still closing (their connections cut): %w", err)
	}
	return nil
}

func (b *Backend[T]) close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	ts := make([]*kTopic[T], 0, len(b.topics))
	for t := range b.topics {
		ts = append(ts, t)
	}
	b.mu.Unlock()
	for _, t := range ts {
		t.Close()
	}
	if b.prod == nil {
		return // New did not make the backend: it has no producer or clients
	}
	close(b.stopEnds)
	<-b.endsDone
	b.prod.close()
	b.admins.Wait()
	_ = b.admin.Close() // closes b.client too
}

func (b *Backend[T]) forget(t *kTopic[T]) {
	b.mu.Lock()
	delete(b.topics, t)
	b.mu.Unlock()
}

// newClient returns a client of its own for one subscriber: consumer
// group traffic (a join waits for the whole group) and long-polling
// fetches must not queue behind each other or behind the producer on a
// shared connection. Its connections are a set of their own within the
// backend's, which the subscriber cuts when its closing outlasts
// Options.AdminTimeout (closeWithin), and which newClient cuts when ctx
// ends before the client has connected (its error then wraps ctx.Err()).
// Each response the client reads is an answer from the cluster, which
// reach hears (kafkareach.Reach.Heard).
func (b *Backend[T]) newClient(ctx context.Context, reach *kafkareach.Reach) (sarama.Client, *kafkaconn.Set, error) {
	cfg, conns := b.conns.Child(b.cfg)
	cfg.MetricRegistry = kafkareach.NewHeardRegistry(cfg.MetricRegistry, reach.Heard)
	stop := conns.CutWhenDone(ctx)
	c, err := sarama.NewClient(b.opts.Brokers, cfg)
	if !stop() {
		if err == nil {
			_ = c.Close()
		}
		return nil, nil, fmt.Errorf("%w: %w", ErrConnect, ctx.Err())
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrConnect, b.red.Err(err))
	}
	return c, conns, nil
}

// closeWithin runs fn, the closing of one subscriber's client, and cuts
// the subscriber's connections when it has not returned within
// Options.AdminTimeout: sarama waits for a broker that stopped answering
// for Net.ReadTimeout per request, with retries, and nothing else
// interrupts it. The requests cut short (leaving the group, the last
// commits) fail; the group then drops the member after its session
// timeout, and what it did not commit is delivered again. A cut under
// way when fn returns is waited for.
func (b *Backend[T]) closeWithin(conns *kafkaconn.Set, fn func()) {
	defer conns.CutAfter(b.opts.AdminTimeout)()
	fn()
}

var (
	_ topic.Backend[int]           = (*Backend[int])(nil)
	_ topic.SubscriptionState[int] = (*member[int])(nil)
	_ topic.SubscriptionState[int] = (*bsub[int])(nil)
)
