package pulsartopic

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"

	"github.com/apache/pulsar-client-go/pulsar"

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

	lookups sync.WaitGroup  // partition lookups and producer creations still running; Close waits for them
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
		co := o.ClientOptions
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
// declaration.
func (b *Backend[T]) NewTopic(ctx context.Context, name topic.Name, opts topic.Options) (topic.State[T], error) {
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
		return 0, &Error{Op: "create partitioned topic", Topic: full, Err: err}
	}
	return want, nil
}

// partitions asks the broker for the topic's partition count (0: not
// partitioned or not there yet), within ctx.
func (b *Backend[T]) partitions(ctx context.Context, full string) (int, error) {
	type result struct {
		n   int
		err error
	}
	// Registered under the lock, so that no lookup starts once the
	// closing waits for them.
	if !liveset.Enter(&b.mu, &b.closed, &b.lookups) {
		return 0, &Error{Op: "look up partitions of", Topic: full, Err: ErrBackendClosed}
	}
	ch := make(chan result, 1)
	go func() {
		defer b.lookups.Done()
		// TopicPartitions takes no context; the client's operation timeout
		// bounds it, so this goroutine ends by then.
		ps, err := b.client.TopicPartitions(full)
		n := 0
		if err == nil && (len(ps) > 1 || len(ps) == 1 && ps[0] != full) {
			n = len(ps)
		}
		ch <- result{n, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return 0, &Error{Op: "look up partitions of", Topic: full, Err: r.err}
		}
		return r.n, nil
	case <-ctx.Done():
		return 0, &Error{Op: "look up partitions of", Topic: full, Err: ctx.Err()}
	}
}

// createProducer creates a topic's producer within ctx. CreateProducer
// takes no context (the client's operation timeout bounds it): when ctx
// ends first, the producer it returns later is closed, and Close waits
// for that.
func (b *Backend[T]) createProducer(ctx context.Context, po pulsar.ProducerOptions) (pulsar.Producer, error) {
	type result struct {
		p   pulsar.Producer
		err error
	}
	if !liveset.Enter(&b.mu, &b.closed, &b.lookups) {
		return nil, ErrBackendClosed
	}
	ch := make(chan result) // unbuffered: a result not taken goes to abandoned
	abandoned := make(chan struct{})
	go func() {
		defer b.lookups.Done()
		p, err := b.client.CreateProducer(po)
		select {
		case ch <- result{p, err}:
		case <-abandoned:
			if err == nil {
				p.Close()
			}
		}
	}()
	select {
	case r := <-ch:
		return r.p, r.err
	case <-ctx.Done():
		close(abandoned)
		return nil, ctx.Err()
	}
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
// declaration left running (the client's operation timeout bounds them,
// and a producer created after its declaration gave up is closed) and, when the backend made its
// own client, closes the client. It returns nil once all are closed. If
// ctx ends first it returns an error wrapping ctx.Err() that names what is
// still closing, and the rest is closed in the background. Idempotent: a
// later call waits, within its own ctx, for the same closing.
func (b *Backend[T]) Close(ctx context.Context) error {
	b.mu.Lock()
	b.closed = true // new topics refuse at once
	b.mu.Unlock()
	if err := liveset.Await(ctx, b.closing.Start(b.close), nil); err != nil {
		what := "its topics, partition lookups and producer creations are"
		if b.owned {
			what = "its topics, partition lookups, producer creations and client are"
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
	b.lookups.Wait()
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
