package topic

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
)

// ErrAliasExists is returned by [TopicSet.Bind] for an alias already bound.
var ErrAliasExists = errors.New("topic: alias already bound")

// ErrNoHandle is returned by [Binding.Publish] and [Binding.Tracked] on a
// binding without a topic handle, such as the zero Binding that
// [TopicSet.Get] returns for an alias that is not bound, and wrapped by
// [TopicSet.Bind] when asked to bind one.
var ErrNoHandle = errors.New("topic: binding has no topic handle")

// Binding is a pipeline's view of a topic: the handle plus the publishing
// defaults the pipeline's configuration resolved for it (queue_on_full and
// ack_propagation). A Binding without a Handle (the zero Binding) publishes
// nothing: its methods return ErrNoHandle.
type Binding[T any] struct {
	// Handle is the bound topic; nil in the zero Binding.
	Handle *Handle[T]
	// OnFull is the full-queue policy Publish and Tracked apply: the
	// pipeline's queue_on_full for this topic, else the topic's
	// balanced.on_full.
	OnFull OnFull
	// AckPropagation is the topic's ack_propagation: its Mode tells a sink
	// whether to publish tracked, and Tracked takes its MaxInFlight and
	// Timeout.
	AckPropagation AckPropagation
}

// Publish publishes v untracked with the binding's OnFull, as
// Handle.PublishWith does (an OnFull other than Block and DropNewest is
// refused with an error wrapping ErrUnknownOnFull). It returns ErrNoHandle,
// with nothing published, when the binding has no Handle, and
// ErrNilContext, nothing published, for a nil ctx.
func (b Binding[T]) Publish(ctx context.Context, v T) (PublishOutcome, error) {
	if b.Handle == nil {
		return 0, ErrNoHandle
	}
	return b.Handle.PublishWith(ctx, v, b.OnFull)
}

// Tracked returns a tracked publisher using the binding's OnFull,
// MaxInFlight and Timeout (zero values fall back to the topic's), that
// logs to slog.Default(). It returns ErrNoHandle when the binding has no
// Handle.
func (b Binding[T]) Tracked() (*TrackedPublisher[T], error) {
	if b.Handle == nil {
		return nil, ErrNoHandle
	}
	return b.Handle.Tracked(b.TrackedOptions())
}

// TrackedOptions returns the options Tracked makes its publisher with:
// the binding's OnFull, MaxInFlight and Timeout, and no Logger. A caller
// with a logger of its own sets Logger and passes them to
// Handle.Tracked.
func (b Binding[T]) TrackedOptions() TrackedOptions {
	return TrackedOptions{
		MaxInFlight: b.AckPropagation.MaxInFlight,
		Timeout:     b.AckPropagation.Timeout,
		OnFull:      b.OnFull,
	}
}

// TopicSet maps a pipeline's local topic aliases to bindings. It is safe for
// concurrent use. Removing an alias never closes the topic. The zero
// TopicSet is an empty set ready to use, and a nil *TopicSet (what
// config.Wired.TopicSet returns for a pipeline that is not wired) is an
// empty set for Get, Remove and Aliases; Bind refuses it with an error
// wrapping ErrNotCreated.
type TopicSet[T any] struct {
	mu sync.RWMutex
	m  map[string]Binding[T]
}

// NewTopicSet returns an empty set.
func NewTopicSet[T any]() *TopicSet[T] {
	return &TopicSet[T]{m: make(map[string]Binding[T])}
}

// Bind adds alias → b. An alias follows the rules of a topic [Name]. It
// returns ErrEmptyName for an empty alias, a [*NameError] for an invalid
// one, an error wrapping ErrNoHandle for a nil handle, and ErrAliasExists
// when alias is already bound. On a nil *TopicSet, which has nowhere to
// keep the alias, it returns an error wrapping ErrNotCreated.
func (s *TopicSet[T]) Bind(alias string, b Binding[T]) error {
	if s == nil {
		return fmt.Errorf("topic: bind %q on a nil TopicSet (make one with NewTopicSet): %w", alias, ErrNotCreated)
	}
	if err := checkName("alias", alias, true); err != nil {
		return err
	}
	if b.Handle == nil {
		return fmt.Errorf("topic: bind %q: %w", alias, ErrNoHandle)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[alias]; ok {
		return ErrAliasExists
	}
	if s.m == nil {
		s.m = make(map[string]Binding[T])
	}
	s.m[alias] = b
	return nil
}

// Get returns the binding of alias, or the zero Binding and false when
// alias is not bound.
func (s *TopicSet[T]) Get(alias string) (Binding[T], bool) {
	if s == nil {
		return Binding[T]{}, false
	}
	s.mu.RLock()
	b, ok := s.m[alias]
	s.mu.RUnlock()
	return b, ok
}

// Remove detaches alias and reports whether it was bound. The topic stays
// open: other pipelines and the broker still use it.
func (s *TopicSet[T]) Remove(alias string) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	_, ok := s.m[alias]
	delete(s.m, alias)
	s.mu.Unlock()
	return ok
}

// Aliases returns the bound aliases, sorted.
func (s *TopicSet[T]) Aliases() []string {
	if s == nil {
		return []string{}
	}
	s.mu.RLock()
	out := make([]string, 0, len(s.m))
	for a := range s.m {
		out = append(out, a)
	}
	s.mu.RUnlock()
	sort.Strings(out)
	return out
}
