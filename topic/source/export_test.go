package source

// HeldSubscriptions is how many subscriptions the source holds: the
// current ones, and those a resubscribe replaced whose messages are not
// all settled yet.
func (s *Source[T]) HeldSubscriptions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.all)
}
