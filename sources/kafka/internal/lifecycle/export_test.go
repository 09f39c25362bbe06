package lifecycle

// CloseWaiters is how many Close calls s keeps track of (those still
// closing).
func CloseWaiters[M Member](s *Members[M]) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.closes)
}
