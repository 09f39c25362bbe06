package pulsartopology

// Crash closes b as a crash of its process would.
func (b *Backend[T]) Crash() { b.crash() }
