package topic

import (
	"context"
	"errors"
	"sort"
	"sync"
)

// ErrAliasExists is returned by [TopicSet.Bind] for an alias already bound.
var ErrAliasExists = errors.New("topic: alias already bound")

// Binding is a pipeline's view of a topic: the handle plus the publishing
// defaults the pipeline's configuration resolved for it (queue_on_full and
// ack_propagation).
type Binding[T any] struct {
	Handle         *Handle[T]
	OnFull         OnFull
	AckPropagation AckPropagation
}

// Publish publishes v untracked with the binding's OnFull.
func (b Binding[T]) Publish(ctx context.Context, v T) (PublishOutcome, error) {
	return b.Handle.PublishWith(ctx, v, b.OnFull)
}

// Tracked returns a tracked publisher using the binding's OnFull,
// MaxInFlight and Timeout (zero values fall back to the topic's).
func (b Binding[T]) Tracked() (*TrackedPublisher[T], error) {
	return b.Handle.Tracked(TrackedOptions{
		MaxInFlight: b.AckPropagation.MaxInFlight,
		Timeout:     b.AckPropagation.Timeout,
		OnFull:      b.OnFull,
	})
}

// TopicSet maps a pipeline's local topic aliases to bindings. It is safe for
// concurrent use. Removing an alias never closes the topic.
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
// one, an error for a nil handle, and ErrAliasExists when alias is already
// bound.
func (s *TopicSet[T]) Bind(alias string, b Binding[T]) error {
	if err := checkName("alias", alias, true); err != nil {
		return err
	}
	if b.Handle == nil {
		return errors.New("topic: Bind with a nil handle")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[alias]; ok {
		return ErrAliasExists
	}
	s.m[alias] = b
	return nil
}

// Get returns the binding of alias.
func (s *TopicSet[T]) Get(alias string) (Binding[T], bool) {
	s.mu.RLock()
	b, ok := s.m[alias]
	s.mu.RUnlock()
	return b, ok
}

// Remove detaches alias and reports whether it was bound. The topic stays
// open: other pipelines and the broker still use it.
func (s *TopicSet[T]) Remove(alias string) bool {
	s.mu.Lock()
	_, ok := s.m[alias]
	delete(s.m, alias)
	s.mu.Unlock()
	return ok
}

// Aliases returns the bound aliases, sorted.
func (s *TopicSet[T]) Aliases() []string {
	s.mu.RLock()
	out := make([]string, 0, len(s.m))
	for a := range s.m {
		out = append(out, a)
	}
	s.mu.RUnlock()
	sort.Strings(out)
	return out
}
