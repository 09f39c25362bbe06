package monitor

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer safe for one writer and concurrent readers: the
// examples' tests read what a running example printed (the address it
// serves on) while it keeps printing.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
