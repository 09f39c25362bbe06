package topology

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic"
)

// PublisherOptions configure a [Publisher].
type PublisherOptions[T any] struct {
	// Key returns a message's sequence key. Required on a sequenced
	// topology, not allowed on any other. A Key that panics fails that
	// Publish with an error wrapping the *message.PanicError; nothing is
	// published.
	Key func(T) string
	// Headers returns the headers a message is published with
	// (Letter.Headers), for example the trace context of the publishing
	// call's span (tracing.TopologyHeaders): every delivery of the
	// message carries them, its retries and its dead letter included. It
	// is called once per Publish, on the publishing goroutine, with
	// Publish's context and value. The headers are handed to the backend
	// as they are: do not change them afterwards. Names starting with
	// ReservedHeaderPrefix are dropped; headers larger than
	// MaxHeaderBytes fail the Publish with an error wrapping
	// ErrHeadersTooLarge. A Headers that panics fails that Publish with
	// an error wrapping the *message.PanicError; nothing is published.
	// Nil (the default) publishes every message without headers.
	Headers func(ctx context.Context, v T) topic.Headers `name:"-"`
}

// WithDefaults returns o unchanged: Key and Headers have no default.
func (o PublisherOptions[T]) WithDefaults() PublisherOptions[T] { return o }

// Validate returns nil: whether Key is required depends on the topology,
// and NewPublisher reports an error wrapping ErrKey when it does not match.
func (o PublisherOptions[T]) Validate() error { return nil }

// ErrKey is wrapped by the error NewPublisher returns when
// PublisherOptions.Key is missing on a sequenced topology or set on
// another; the error names the topology and what to change.
var ErrKey = errors.New("topology: a sequenced topology needs a key function, and only a sequenced one takes one")

// Publisher publishes messages to a topology's main topic, routing the
// messages of a sequenced topology to their key's shard. It is safe for
// concurrent use; messages of one key keep their order when they are
// published from one goroutine.
type Publisher[T any] struct {
	q       Queues[T]
	key     func(T) string
	headers func(context.Context, T) topic.Headers
	shards  int
}

// errZeroPublisher is what Publish returns on a Publisher NewPublisher did
// not make.
var errZeroPublisher = fmt.Errorf("topology: zero Publisher (make one with NewPublisher): %w", topic.ErrNotCreated)

// NewPublisher returns a publisher into q's main topic. A nil q, or one
// whose Topology returns nil, is a validate.FieldError ("publisher.queues
// is required", "publisher.queues has no topology").
func NewPublisher[T any](q Queues[T], opts PublisherOptions[T]) (*Publisher[T], error) {
	if err := checkQueues("publisher.queues", q); err != nil {
		return nil, err
	}
	t := q.Topology()
	switch _, seq := t.Sequenced(); {
	case seq && opts.Key == nil:
		return nil, fmt.Errorf("%w: topology %q is sequenced and PublisherOptions.Key is nil; set it to a function that returns each message's sequence key", ErrKey, t.Name())
	case !seq && opts.Key != nil:
		return nil, fmt.Errorf("%w: topology %q is not sequenced and PublisherOptions.Key is set; leave it nil, or build the topology with Sequenced", ErrKey, t.Name())
	}
	return &Publisher[T]{q: q, key: opts.Key, headers: opts.Headers, shards: t.shards}, nil
}

// Publish appends v to the main topic. It may wait for room; it returns
// ctx.Err() or ErrClosed when it could not publish: nothing was
// published then, except on the in-memory backend with several consumer
// groups on the topic, where the groups it had put v in before it waited
// keep it (a publish tried again gives them v twice). On a Publisher
// NewPublisher did not make (a zero value) it publishes nothing and
// returns an error wrapping topic.ErrNotCreated. A nil ctx returns
// ErrNilContext, nothing published. The message carries the headers
// PublisherOptions.Headers gives it; a panic of Headers, or headers over
// MaxHeaderBytes (ErrHeadersTooLarge), fail the Publish, nothing
// published.
func (p *Publisher[T]) Publish(ctx context.Context, v T) error {
	if p.q == nil {
		return errZeroPublisher
	}
	if ctx == nil {
		return ErrNilContext
	}
	l := Letter[T]{Value: v}
	if p.key != nil {
		k, err := keyOf(p.key, v)
		if err != nil {
			return fmt.Errorf("topology %s: Publisher Key: %w", p.q.Topology().Name(), err)
		}
		l.Key = k
		l.Shard = ShardOf(l.Key, p.shards)
	}
	if p.headers != nil {
		h, err := headersOf(ctx, p.headers, v)
		if err != nil {
			return fmt.Errorf("topology %s: Publisher Headers: %w", p.q.Topology().Name(), err)
		}
		if err := CheckHeaders(h); err != nil {
			return fmt.Errorf("topology %s: %w", p.q.Topology().Name(), err)
		}
		l.Headers = h
	}
	return p.q.Publish(ctx, l)
}

// headersOf calls headers on ctx and v and returns a panic in it as a
// *message.PanicError.
func headersOf[T any](ctx context.Context, headers func(context.Context, T) topic.Headers, v T) (h topic.Headers, err error) {
	defer message.Recover(&err)
	return headers(ctx, v), nil
}

// keyOf calls key on v and returns a panic in it as a *message.PanicError.
func keyOf[T any](key func(T) string, v T) (k string, err error) {
	defer message.Recover(&err)
	return key(v), nil
}

// ShardOf returns the shard, in [0, shards), that key is routed to: a jump
// consistent hash of the key's 64-bit FNV-1a hash, so changing the number
// of shards from n to n+1 moves only about 1/(n+1) of the keys. shards < 1
// is treated as 1.
func ShardOf(key string, shards int) int {
	if shards <= 1 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	return jump(h.Sum64(), shards)
}

// jump is Lamping and Veach's jump consistent hash.
func jump(key uint64, buckets int) int {
	var b, j int64 = -1, 0
	for j < int64(buckets) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return int(b)
}
