package pulsartopology

import "context"

// Crash closes b, within ctx, as a crash of its process would.
func (b *Backend[T]) Crash(ctx context.Context) error { return b.crash(ctx) }
