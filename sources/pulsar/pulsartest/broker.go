// Package pulsartest is an in-process Pulsar broker for tests. It speaks the
// Pulsar binary protocol on a loopback port, well enough that
// github.com/apache/pulsar-client-go works against it unchanged: connect,
// lookup, partitioned-topic metadata, producers with send receipts (batched
// payloads are stored and redelivered byte for byte), exclusive, shared,
// failover and key-shared subscriptions, flow permits, individual,
// cumulative and batch-index acks, redelivery with redelivery counts,
// delayed delivery, unsubscribe, last message id and ping/pong. Anything
// else is answered with a protocol error naming the command.
//
// Alongside the protocol it offers a test API: create topics and add
// partitions to them, publish and read back messages, observe per consumer
// the permits it granted and the messages dispatched, acked, nacked and
// redelivered, and inject faults (drop connections, refuse subscribes,
// stall dispatch, leave commands unanswered, unload topics, delete
// subscriptions and topics). AdminHandler
// serves the part of the admin REST API that reads and sets a namespace's
// backlog quotas and subscription expiration time (stored and reported;
// of them, the size limit of a destination_storage quota and the time
// limit of a message_age quota are enforced).
//
// Everything is kept in memory; a Broker is meant to live for one test.
package pulsartest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/boulevard-go/boulevard/internal/loopback"
	"github.com/boulevard-go/boulevard/validate"
)

// Errors returned by the test API.
var (
	// ErrClosed is returned by calls on a closed Broker.
	ErrClosed = errors.New("pulsartest: broker closed")
	// ErrTopicExists is returned by CreateTopic for a topic that already
	// exists with a different partition count.
	ErrTopicExists = errors.New("pulsartest: topic exists with another partition count")
	// ErrNotPartitioned is returned by UpdatePartitions for a topic that
	// is not partitioned.
	ErrNotPartitioned = errors.New("pulsartest: topic is not partitioned")
	// ErrPartitionsShrink is returned by UpdatePartitions when asked for
	// fewer partitions than the topic has: as on Pulsar, partitions can
	// only be added.
	ErrPartitionsShrink = errors.New("pulsartest: partitions can only be added")
	// ErrInvalidTopic is returned for topic names the broker cannot parse.
	ErrInvalidTopic = errors.New("pulsartest: invalid topic name")
	// ErrChecksum is wrapped when a published payload fails its CRC32-C check.
	ErrChecksum = errors.New("pulsartest: checksum mismatch")
	// ErrSubscriptionNotFound is returned by DeleteSubscription for a
	// subscription the topic does not have (a real broker's 404
	// "Subscription not found").
	ErrSubscriptionNotFound = errors.New("pulsartest: subscription not found")
	// ErrSubscriptionBusy is returned by DeleteSubscription without force
	// while consumers are connected to the subscription (a real broker's
	// 412 "Subscription has active connected consumers").
	ErrSubscriptionBusy = errors.New("pulsartest: subscription has active connected consumers")
	// ErrTopicNotFound is returned by DeleteTopic for a topic the broker
	// does not have (a real broker's 404 "Topic not found").
	ErrTopicNotFound = errors.New("pulsartest: topic not found")
	// ErrTopicBusy is returned by DeleteTopic without force while the
	// topic has producers or consumers connected (a real broker's 412
	// "Topic has active producers/subscriptions").
	ErrTopicBusy = errors.New("pulsartest: topic has active producers/subscriptions")
)

// Options configure a Broker. The zero value is usable; see WithDefaults.
type Options struct {
	// Addr is the TCP address to listen on. Default "127.0.0.1:0" (a free
	// loopback port). An address without a host (":6650") listens on
	// 127.0.0.1 too: name a host to listen elsewhere ("0.0.0.0:6650").
	Addr string `validate:"required"`
	// Logger receives connection-level events. Nil means slog.Default().
	Logger *slog.Logger
	// ServerVersion is reported to clients in CONNECTED. Default "pulsartest".
	ServerVersion string `validate:"required"`
	// MaxMessageSize is announced to clients in CONNECTED; producers chunk
	// or reject messages above it. Default 5 MiB; at least 1 KiB, at most
	// 5 MiB.
	MaxMessageSize int `validate:"gte=1024,lte=5242880"`
	// HandshakeTimeout bounds the time from accepting a connection to
	// receiving its CONNECT command; a connection that has not completed
	// it by then (silent, or sending its bytes slowly) is closed. Until
	// CONNECT a frame may be at most 64 KiB. Default 10 s, at least 1 ms,
	// at most MaxTimeout (1 h).
	HandshakeTimeout time.Duration `validate:"gte=1ms,lte=1h"`
	// BatchIndexAck honours batch-index acknowledgements (an ack that
	// carries an ack_set, acknowledging some messages of a batch), as a
	// broker with acknowledgmentAtBatchIndexLevelEnabled does. Default
	// false, as in Pulsar 4.0: such an ack is ignored, the batch stays
	// unacknowledged until an ack of the whole entry, and a redelivered
	// batch comes back whole.
	BatchIndexAck bool
	// StrictBatchPermits sends an entry only when the consumer's permits
	// cover all its messages, so that what is in flight never exceeds what
	// the consumer granted, even with batches, and makes Shared
	// subscriptions go round-robin one entry at a time. A real broker does
	// not do this (see Semantics in docs/pulsartest.md: it reads up to
	// min(permits, 100) entries and sends them, so with batches the permits
	// go negative, and Shared hands out turns of up to 20 messages); use it
	// to test a client's own permit accounting. Default false.
	StrictBatchPermits bool
	// MaxUnackedPerConsumer stops dispatch to a Shared or Key_Shared
	// consumer once it holds that many unacknowledged messages, until its
	// acks bring them down to half, as a real broker's
	// maxUnackedMessagesPerConsumer does (a redelivery of everything it
	// holds unblocks it at once). Default 50 000, as in Pulsar 4.0; a
	// negative value sets no limit.
	MaxUnackedPerConsumer int
	// MaxOutgoingBytes bounds what the broker keeps queued for one
	// connection: the bytes of the frames it wrote for the client that the
	// socket has not accepted yet. Once they reach it, the broker sends the
	// connection's consumers no more messages (other consumers of their
	// subscriptions get them meanwhile, as on a real broker, which stops
	// writing to a connection that is not writable) and reads no more of
	// the connection's commands, until the client has read enough for them
	// to fall under half of it. A connection's queue stays within it plus
	// one message, the answers to one command and the few notices the
	// broker sends unasked (CLOSE_CONSUMER, ACTIVE_CONSUMER_CHANGE).
	// Default 16 MiB
	// (DefaultMaxOutgoingBytes), 64 KiB to 256 MiB.
	MaxOutgoingBytes int `validate:"gte=65536,lte=268435456"`
	// WriteTimeout bounds how long the socket of a connection may take to
	// accept what the broker has queued for it: a client that stops
	// reading is closed when it passes, as if it had disconnected (its
	// consumers' unacknowledged messages go to other consumers). Default
	// 30 s (DefaultWriteTimeout), at least 1 ms, at most MaxTimeout (1 h).
	WriteTimeout time.Duration `validate:"gte=1ms,lte=1h"`
	// AuthToken, when set, makes the broker require token authentication,
	// as a broker with authenticationEnabled and the token provider does:
	// a CONNECT must carry the auth method name "token" and AuthToken as
	// its auth data. Any other CONNECT (no credentials, another method, a
	// wrong token) is answered as Pulsar answers a failed authentication,
	// with an ERROR of code AuthenticationError ("Failed to authenticate",
	// request id -1), and the connection is closed; it counts in
	// BrokerStats.AuthenticationFailures. The token is never logged.
	// Default "": no authentication, every CONNECT is accepted.
	AuthToken string
}

// DefaultMaxOutgoingBytes is the default Options.MaxOutgoingBytes.
const DefaultMaxOutgoingBytes = 16 << 20

// DefaultWriteTimeout is the default Options.WriteTimeout.
const DefaultWriteTimeout = 30 * time.Second

// DefaultMaxUnackedPerConsumer is the default Options.MaxUnackedPerConsumer
// (Pulsar's maxUnackedMessagesPerConsumer).
const DefaultMaxUnackedPerConsumer = 50000

// DefaultHandshakeTimeout is the default Options.HandshakeTimeout.
const DefaultHandshakeTimeout = 10 * time.Second

// MaxTimeout is the largest Options.HandshakeTimeout and
// Options.WriteTimeout.
const MaxTimeout = time.Hour

// WithDefaults returns o with every unset field set to its default.
func (o Options) WithDefaults() Options {
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	if o.ServerVersion == "" {
		o.ServerVersion = "pulsartest"
	}
	if o.MaxMessageSize == 0 {
		o.MaxMessageSize = maxMessageSize
	}
	if o.HandshakeTimeout == 0 {
		o.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if o.MaxUnackedPerConsumer == 0 {
		o.MaxUnackedPerConsumer = DefaultMaxUnackedPerConsumer
	}
	if o.MaxOutgoingBytes == 0 {
		o.MaxOutgoingBytes = DefaultMaxOutgoingBytes
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	return o
}

// Validate returns nil or a validate.Errors naming every field out of its
// bounds (call WithDefaults first). Start calls it.
func (o Options) Validate() error { return validate.Struct("pulsartest", &o) }

// Broker is a running in-process Pulsar broker. It owns its listener and
// every goroutine it starts; Close stops them all.
type Broker struct {
	opts Options
	log  *slog.Logger
	ln   net.Listener
	url  string

	wg        sync.WaitGroup
	closeOnce sync.Once
	// framesBegun counts frame headers read, for tests that need to know
	// the broker has seen a frame's declared size.
	framesBegun atomic.Int64
	done        chan struct{}
	wakeTimer   chan struct{}

	mu          sync.Mutex
	closed      bool
	topics      map[string]*topic
	partitioned map[string]int
	conns       map[*conn]struct{}
	nextConnID  uint64
	nextProdNum uint64
	refused     map[subKey]error
	stalled     map[string]bool
	stats       BrokerStats
	// withheld maps a command type Withhold holds back to the channel its
	// release closes; withholding counts its entries, so that a command
	// is checked against it only while it has some.
	withheld    map[int]chan struct{}
	withholding atomic.Int32
	// maxQueued is the most bytes ever queued for one connection.
	maxQueued atomic.Int64
	// delayed holds every entry of a Shared or Key_Shared subscription
	// waiting for its delivery time, earliest first, and delayedStale
	// counts its stale items (see delayedHeap); nextWake is the delivery
	// time the timer goroutine waits for (0: none).
	delayed      delayedHeap
	delayedStale int
	nextWake     int64
	released     []*subscription // releaseDelayedLocked's scratch

	// admin are the namespace policies AdminHandler serves.
	admin adminPolicies
	// clock is the clock SetClock set (nil: time.Now).
	clock func() time.Time
}

// BrokerStats counts connection-level events.
type BrokerStats struct {
	// ConnectionsAccepted counts TCP connections accepted so far.
	ConnectionsAccepted int
	// ConnectionsOpen is the number of connections currently open.
	ConnectionsOpen int
	// ConsumersOpen and ProducersOpen are the consumers and producers
	// currently open on those connections, on every topic.
	ConsumersOpen, ProducersOpen int
	// Pings counts PING commands received (each answered with PONG).
	Pings int64
	// UnsupportedCommands counts commands answered with a protocol error
	// because the broker does not implement them.
	UnsupportedCommands int64
	// SubscribesRefused counts SUBSCRIBE commands refused because of
	// RefuseSubscribe.
	SubscribesRefused int64
	// Withheld is the number of commands held back now by Withhold: one
	// per connection at most, since a connection is not read past one.
	Withheld int
	// QueuedBytes is what the broker has queued now for its clients, on
	// every connection: frames written that no socket has accepted yet.
	// MaxQueuedBytes is the most ever queued for one connection (see
	// Options.MaxOutgoingBytes).
	QueuedBytes, MaxQueuedBytes int64
	// WriteTimeouts counts connections closed because their socket did
	// not accept the broker's data within Options.WriteTimeout.
	WriteTimeouts int64
	// AuthenticationFailures counts CONNECT commands refused because they
	// did not carry Options.AuthToken.
	AuthenticationFailures int64
}

// Stats returns the connection-level counters.
func (b *Broker) Stats() BrokerStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.stats
	st.ConnectionsOpen = len(b.conns)
	for c := range b.conns {
		st.ConsumersOpen += len(c.consumers)
		st.ProducersOpen += len(c.producers)
		st.QueuedBytes += c.queued.Load()
	}
	st.MaxQueuedBytes = b.maxQueued.Load()
	return st
}

type subKey struct{ topic, sub string }

// Start validates opts, listens at once and serves until Close. ctx bounds
// only the start-up; cancel it afterwards and the broker keeps running.
func Start(ctx context.Context, opts Options) (*Broker, error) {
	opts = opts.WithDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", loopback.Addr(opts.Addr))
	if err != nil {
		return nil, fmt.Errorf("pulsartest: listen on %s: %w", opts.Addr, err)
	}
	logger := cmp.Or(opts.Logger, slog.Default())
	b := &Broker{
		opts:        opts,
		log:         logger,
		ln:          ln,
		url:         "pulsar://" + ln.Addr().String(),
		done:        make(chan struct{}),
		wakeTimer:   make(chan struct{}, 1),
		topics:      map[string]*topic{},
		partitioned: map[string]int{},
		conns:       map[*conn]struct{}{},
		refused:     map[subKey]error{},
		stalled:     map[string]bool{},
		withheld:    map[int]chan struct{}{},
	}
	b.wg.Add(2)
	go b.acceptLoop()
	go b.timerLoop()
	b.log.Debug("pulsartest broker listening", "url", b.url)
	return b, nil
}

// URL returns the service URL for clients, "pulsar://127.0.0.1:PORT".
func (b *Broker) URL() string { return b.url }

// Addr returns the address the broker listens on, nil for a Broker Start
// did not make (whose URL is "").
func (b *Broker) Addr() net.Addr {
	if b.ln == nil {
		return nil
	}
	return b.ln.Addr()
}

// Close stops listening, closes every client connection and waits for all
// of the broker's goroutines. Stored topics stay readable through Messages.
// Close is idempotent. Close of a nil Broker (what a failed Start
// returns) or of one Start did not make returns nil; the calls of the
// test API on a Broker Start did not make return ErrClosed.
func (b *Broker) Close() error {
	if b == nil || b.done == nil {
		return nil
	}
	var err error
	b.closeOnce.Do(func() {
		b.mu.Lock()
		b.closed = true
		conns := make([]*conn, 0, len(b.conns))
		for c := range b.conns {
			conns = append(conns, c)
		}
		b.mu.Unlock()
		close(b.done)
		err = b.ln.Close()
		for _, c := range conns {
			c.close()
		}
		b.wg.Wait()
		if errors.Is(err, net.ErrClosed) {
			err = nil
		}
	})
	return err
}

// shut reports, under b.mu, whether the test API refuses calls with
// ErrClosed: the broker is closed, or Start did not make it.
func (b *Broker) shut() bool { return b.closed || b.done == nil }

func (b *Broker) acceptLoop() {
	defer b.wg.Done()
	for {
		nc, err := b.ln.Accept()
		if err != nil {
			select {
			case <-b.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			// No client connects any more: a test waiting for one
			// cannot get past it.
			b.log.Error("pulsartest: accepting a connection failed; the broker accepts no more connections", "error", err)
			return
		}
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			_ = nc.Close()
			return
		}
		b.nextConnID++
		b.stats.ConnectionsAccepted++
		c := newConn(b, nc, b.nextConnID)
		b.conns[c] = struct{}{}
		b.wg.Add(2)
		b.mu.Unlock()
		go c.readLoop()
		go c.writeLoop()
	}
}

// timerLoop releases delayed messages (deliver-at times) when they fall due.
func (b *Broker) timerLoop() {
	defer b.wg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		select {
		case <-b.done:
			return
		case <-t.C:
		case <-b.wakeTimer:
		}
		b.mu.Lock()
		next := b.releaseDelayedLocked(time.Now())
		b.nextWake = 0
		if !next.IsZero() {
			b.nextWake = next.UnixMilli()
		}
		b.mu.Unlock()
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		if next.IsZero() {
			t.Reset(time.Hour)
		} else {
			t.Reset(max(time.Until(next), time.Millisecond))
		}
	}
}

func (b *Broker) kickTimer() {
	select {
	case b.wakeTimer <- struct{}{}:
	default:
	}
}

// ---- topic names ----

const persistentPrefix = "persistent://"

// topicName is a parsed topic name.
type topicName struct {
	full      string // persistent://tenant/ns/local
	base      string // full name without -partition-N
	partition int32  // -1 when not a partition
}

const partitionSuffix = "-partition-"

// parseTopic completes short names ("x" → persistent://public/default/x,
// "t/ns/x" → persistent://t/ns/x) and splits off a partition suffix.
// non-persistent:// topics are stored like persistent ones (Messages
// reads them back) but dispatched as a real broker dispatches them: see
// topic.nonPersistent.
func parseTopic(name string) (topicName, error) {
	rest := name
	scheme := persistentPrefix
	if i := strings.Index(name, "://"); i >= 0 {
		scheme = name[:i+3]
		rest = name[i+3:]
		if scheme != persistentPrefix && scheme != "non-persistent://" {
			return topicName{}, fmt.Errorf("%w: %q has an unknown domain", ErrInvalidTopic, name)
		}
	}
	switch strings.Count(rest, "/") {
	case 0:
		if i := strings.Index(name, "://"); i >= 0 {
			return topicName{}, fmt.Errorf("%w: %q", ErrInvalidTopic, name)
		}
		rest = "public/default/" + rest
	case 2:
	default:
		return topicName{}, fmt.Errorf("%w: %q", ErrInvalidTopic, name)
	}
	parts := strings.Split(rest, "/")
	for _, p := range parts {
		if p == "" {
			return topicName{}, fmt.Errorf("%w: %q has an empty part", ErrInvalidTopic, name)
		}
	}
	tn := topicName{full: scheme + rest, base: scheme + rest, partition: -1}
	if i := strings.LastIndex(tn.full, partitionSuffix); i >= 0 {
		n := 0
		digits := tn.full[i+len(partitionSuffix):]
		ok := digits != ""
		for _, r := range digits {
			if r < '0' || r > '9' || n > 1<<20 {
				ok = false
				break
			}
			n = n*10 + int(r-'0')
		}
		if ok {
			tn.base = tn.full[:i]
			tn.partition = int32(n)
		}
	}
	return tn, nil
}

// PartitionTopic returns the name of partition i of topic, completing a
// short name: PartitionTopic("x", 2) is "persistent://public/default/x-partition-2".
func PartitionTopic(topic string, i int) string {
	tn, err := parseTopic(topic)
	if err != nil {
		return topic + partitionSuffix + fmt.Sprint(i)
	}
	return fmt.Sprintf("%s%s%d", tn.base, partitionSuffix, i)
}

// FullTopicName completes a short topic name the way the broker does:
// "x" → "persistent://public/default/x".
func FullTopicName(topic string) string {
	tn, err := parseTopic(topic)
	if err != nil {
		return topic
	}
	return tn.full
}
