package pulsartopic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/group"
	"github.com/boulevard-go/boulevard/internal/liveset"
	"github.com/boulevard-go/boulevard/internal/redact"
	spulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/topic"
)

// Name is the backend's configuration name.
const Name = "pulsar"

// Backend puts topics on Apache Pulsar. Create it with [New]; it is safe
// for concurrent use. Every topic it creates shares its client.
type Backend[T any] struct {
	o      Options[T]
	client pulsar.Client
	owned  bool // the backend made client and closes it

	// calls are the client calls under way (partition lookups, producer
	// creations, subscribes); Close waits for each until it is abandoned
	// (see bounded). Shut under mu with closed.
	calls   group.Background
	closing liveset.Closing // what Close started

	mu     sync.Mutex
	closed bool
	topics map[*pTopic[T]]struct{}
}

// New validates opts (defaults applied) and returns a backend. With
// ServiceURL it makes its own client, through sources/pulsar's NewClient,
// so connecting and each broker operation are bounded (see
// ClientDefaults); nothing is sent to the broker before the first topic is
// declared. Errors are a validate.Errors naming each broken option, or the
// client's error with the URL's user information redacted.
func New[T any](opts Options[T]) (*Backend[T], error) {
	o := opts.WithDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	b := &Backend[T]{o: o, client: o.Client, topics: make(map[*pTopic[T]]struct{})}
	if b.client == nil {
		// The client gives up within the bounds Close waits for a call
		// under way (AdminTimeout, SubscribeTimeout), so that none of its
		// calls outlives Close.
		co := spulsar.ClientDefaultsWithin(o.ClientOptions, min(o.AdminTimeout, o.SubscribeTimeout))
		co.URL = o.ServiceURL
		c, err := spulsar.NewClient(co, o.Logger)
		if err != nil {
			return nil, err
		}
		b.client, b.owned = c, true
	}
	return b, nil
}

// Name returns "pulsar".
func (b *Backend[T]) Name() string { return Name }

// Capabilities declares what the backend honours:
//
//   - every mode: balanced groups are Shared (Key_Shared with Options.Key)
//     subscriptions named after the group, broadcast subscribers exclusive
//     non-durable subscriptions starting at the latest message;
//   - on_full block and drop_newest, applied to the producer's pending
//     queue (Options.MaxPendingMessages), not to slow consumers;
//   - on_lag drop_oldest: a broadcast subscriber reads from the topic, which
//     keeps messages by its retention; there is no ring to fall behind;
//   - ack_mode first and propagation disabled only: the outcome of a
//     message handled in another process does not travel back to its
//     publisher;
//   - FeatureDurable on persistent topics: acks and nacks are settled with
//     the broker.
func (b *Backend[T]) Capabilities() topic.Capabilities {
	c := topic.Capabilities{
		Modes:       []topic.Mode{topic.BalancedOnly, topic.BroadcastOnly, topic.Mixed},
		OnFull:      []topic.OnFull{topic.Block, topic.DropNewest},
		OnLag:       []topic.OnLag{topic.DropOldest},
		AckModes:    []topic.AckMode{topic.AckFirst},
		Propagation: []topic.PropagationMode{topic.PropagationDisabled},
	}
	if !b.o.NonPersistent {
		c.Features = []topic.Feature{topic.FeatureDurable}
	}
	return c
}

// TopicName returns the full Pulsar topic name the backend uses for name.
func (b *Backend[T]) TopicName(name topic.Name) string { return b.o.topicName(name) }

// NewTopic declares the topic on the broker and returns its state: it
// checks the topic's partition count against Options.Partitions, creates
// a missing partitioned topic through Options.Admin, and creates the
// topic's producer (which creates a missing non-partitioned topic). A
// topic that exists with the same partition count is used as it is, so
// declaring is idempotent. ctx and Options.AdminTimeout bound the
// declaration. A nil Backend returns ErrBackendClosed, as a closed one
// does. A Backend New did not make returns an error wrapping
// topic.ErrNotCreated at once, and ErrBackendClosed once closed.
// A nil ctx returns topic.ErrNilContext, nothing declared.
func (b *Backend[T]) NewTopic(ctx context.Context, name topic.Name, opts topic.Options) (topic.State[T], error) {
	if ctx == nil {
		return nil, topic.ErrNilContext
	}
	if b == nil {
		return nil, ErrBackendClosed
	}
	if b.client == nil { // a Backend New did not make
		if liveset.Closed(&b.mu, &b.closed) {
			return nil, ErrBackendClosed
		}
		return nil, errZeroBackend
	}
	ctx, cancel := context.WithTimeout(ctx, b.o.AdminTimeout)
	defer cancel()
	full := b.o.topicName(name)
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return nil, ErrBackendClosed
	}
	partitions, err := b.declare(ctx, full)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, &Error{Op: "declare topic", Topic: full, Err: err}
	}
	t, err := newTopic(ctx, b, name, full, partitions, opts)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		t.close(true)
		return nil, ErrBackendClosed
	}
	b.topics[t] = struct{}{}
	b.mu.Unlock()
	return t, nil
}

// declare makes sure the topic exists with the wanted partition count and
// returns that count.
func (b *Backend[T]) declare(ctx context.Context, full string) (int, error) {
	have, err := b.partitions(ctx, full)
	if err != nil {
		return 0, err
	}
	want := b.o.Partitions
	switch {
	case have == want:
		return want, nil
	case have != 0 || want == 0:
		return 0, &PartitionError{Topic: full, Have: have, Want: want}
	case b.o.Admin == nil:
		return 0, &Error{Op: "declare topic", Topic: full, Err: ErrNoAdmin}
	}
	if err := b.o.Admin.CreatePartitionedTopic(ctx, full, want); err != nil {
		// Another process may have created it meanwhile: look again.
		if have, err2 := b.partitions(ctx, full); err2 == nil && have == want {
			return want, nil
		}
		return 0, b.fail("create partitioned topic", full, err)
	}
	return want, nil
}

// partitions asks the broker for the topic's partition count (0: not
// partitioned or not there yet), within ctx.
func (b *Backend[T]) partitions(ctx context.Context, full string) (int, error) {
	// TopicPartitions takes no context; the client's operation timeout
	// bounds it, unless the client never returns.
	began := time.Now()
	n, err := bounded(ctx, b, "look up partitions of", full, b.o.AdminTimeout, nil, func() (int, error) {
		ps, err := b.client.TopicPartitions(full)
		n := 0
		if err == nil && (len(ps) > 1 || len(ps) == 1 && ps[0] != full) {
			n = len(ps)
		}
		return n, err
	}, func(int) {})
	if err != nil {
		return 0, b.fail("look up partitions of", full, b.unreached(err, began))
	}
	return n, nil
}

// unreached returns err, the error of a client call begun at began,
// wrapping ErrConnect and naming the broker and the client's latest
// connection failure since began, when the client (one the backend made,
// or one sources/pulsar's NewClient made) logged one; otherwise err. A
// closed backend's error is returned as it is.
func (b *Backend[T]) unreached(err error, began time.Time) error {
	if c, ok := b.client.(*spulsar.Client); ok && !errors.Is(err, ErrBackendClosed) {
		return c.Unreached(ErrConnect, err, began)
	}
	return err
}

// createProducer creates a topic's producer within ctx and
// Options.AdminTimeout (see bounded): a producer created once its caller
// gave up is closed.
func (b *Backend[T]) createProducer(ctx context.Context, po pulsar.ProducerOptions) (pulsar.Producer, error) {
	began := time.Now()
	p, err := bounded(ctx, b, "create producer for", po.Topic, b.o.AdminTimeout, nil, func() (pulsar.Producer, error) {
		return b.client.CreateProducer(po)
	}, pulsar.Producer.Close)
	return p, b.unreached(err, began)
}

// errZeroBackend is what NewTopic returns on a Backend New did not make,
// before it is closed.
var errZeroBackend = fmt.Errorf("pulsartopic: zero Backend (make one with New): %w", topic.ErrNotCreated)

// bounded runs call, a client call that takes no context (op on topic
// full), on a goroutine of the backend, and waits for it within ctx and
// timeout. Once the backend is closed it makes no call and returns
// ErrBackendClosed. When ctx ends first it returns ctx.Err(). Past
// timeout the call is abandoned: bounded logs one ERROR line naming it
// and the timeout, and returns an error wrapping timeoutErr (unless nil)
// and context.DeadlineExceeded. Either way the call goes on until the
// client returns, and what it makes then is handed to release; the
// backend's Close waits for it until timeout has passed since it began,
// and no longer (pulsar-client-go can deadlock a Subscribe, see
// Options.SubscribeTimeout).
func bounded[T, R any](ctx context.Context, b *Backend[T], op, full string, timeout time.Duration, timeoutErr error, call func() (R, error), release func(R)) (R, error) {
	r, err := group.Await(ctx, &b.calls, timeout, call, release)
	switch {
	case errors.Is(err, group.ErrShut):
		return r, ErrBackendClosed
	case errors.Is(err, group.ErrAbandoned):
		b.o.Logger.Error("pulsartopic: the client did not return within its timeout; its call is abandoned, and what it makes if it ever returns is closed",
			slog.String("call", op), slog.String("topic", full), slog.Duration("timeout", timeout))
		err = fmt.Errorf("the client did not return within %s: %w", timeout, context.DeadlineExceeded)
		if timeoutErr != nil {
			err = fmt.Errorf("%w: %w", timeoutErr, err)
		}
	}
	return r, err
}

func (b *Backend[T]) forget(t *pTopic[T]) {
	b.mu.Lock()
	delete(b.topics, t)
	b.mu.Unlock()
}

// Close closes every topic the backend created that is still open (their
// publishes fail with topic.ErrTopicClosed, their subscribers are closed),
// all together: a broker that leaves the closes unanswered holds the
// closing for about two of the client's operation timeouts (a topic's
// subscribers, then its producer), however many topics there are;
// waits for the partition lookups and producer creations a cancelled
// declaration left running, and the subscribes under way (the client's
// operation timeout bounds them, and what one makes after its caller gave
// up is closed; one the client has not returned from within
// Options.AdminTimeout, or Options.SubscribeTimeout for a subscribe, is
// abandoned and no longer waited for) and, when the backend made its own
// client, closes the client. It returns nil once all are closed. If
// ctx ends first it returns an error wrapping ctx.Err() that names what is
// still closing, and the rest is closed in the background. Idempotent: a
// later call waits, within its own ctx, for the same closing. Close of a
// nil Backend returns nil, and so does that of one New did not make,
// whose later calls then report it closed.
//
// A producer that pulsar-client-go (v0.21.0) is reconnecting, after its
// connection dropped, when Close closes it goes on reconnecting on a
// goroutine of the client's that nothing in the client's API lets Close
// wait for or stop: its topic lookup retries for up to the client's
// operation timeout after Close returned and, when it reaches the broker,
// registers the producer there again on a connection of its own, which
// neither the closed producer nor the closed client closes.
// A nil ctx returns topic.ErrNilContext and leaves the backend as it
// was, open: call Close again with a context.
func (b *Backend[T]) Close(ctx context.Context) error {
	if ctx == nil {
		return topic.ErrNilContext
	}
	if b == nil {
		return nil
	}
	b.mu.Lock()
	b.closed = true // new topics refuse at once
	b.calls.Shut()
	b.mu.Unlock()
	if err := liveset.Await(ctx, b.closing.Start(b.close), nil); err != nil {
		what := "its topics, partition lookups, producer creations and subscribes are"
		if b.owned {
			what = "its topics, partition lookups, producer creations, subscribes and client are"
		}
		return fmt.Errorf("pulsartopic: closing the backend: %s still closing: %w", what, err)
	}
	return nil
}

// close is the closing Close starts, once the backend is marked closed.
func (b *Backend[T]) close() {
	b.mu.Lock()
	ts := make([]*pTopic[T], 0, len(b.topics))
	for t := range b.topics {
		ts = append(ts, t)
	}
	b.mu.Unlock()
	// The topics close together: each close waits for the broker's
	// answers, up to the client's operation timeout when it gives none,
	// and one after another they would take that many times longer.
	var wg sync.WaitGroup
	for _, t := range ts {
		wg.Go(func() { t.close(true) })
	}
	wg.Wait()
	<-b.calls.Idle()
	if b.owned {
		b.client.Close()
	}
}

// String names the backend and its broker, without credentials: the
// service URL of a client the backend made, its user information
// redacted, or "a shared client".
func (b *Backend[T]) String() string {
	if b == nil {
		return "pulsartopic backend (nil)"
	}
	return "pulsartopic backend for " + clientName(b.client)
}

// GoString is String: the backend's fields hold its options, the service
// URL's user information included.
func (b *Backend[T]) GoString() string { return b.String() }

// Format writes String for every verb (quoted for %q), so that no verb
// reaches the backend's fields.
func (b *Backend[T]) Format(f fmt.State, verb rune) { redact.Format(f, verb, b.String()) }

// LogValue logs what String shows.
func (b *Backend[T]) LogValue() slog.Value { return slog.StringValue(b.String()) }

// MarshalJSON encodes String.
func (b *Backend[T]) MarshalJSON() ([]byte, error) { return json.Marshal(b.String()) }

func clientName(c pulsar.Client) string {
	if u, ok := c.(interface{ ServiceURL() string }); ok {
		return spulsar.RedactURL(u.ServiceURL())
	}
	return "a shared client"
}
