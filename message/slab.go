package message

import (
	"unsafe"

	"github.com/boulevard-go/boulevard/acker"
)

// slabBytes is the size of a Slab's block: 8 KiB less the allocator's
// header, so that a block fills its size class without waste.
const slabBytes = 8192 - 8

// Slab makes messages for a source that creates many: New carves them from
// blocks of about 8 KiB allocated at once (93 messages of []byte per
// block), one allocation per block instead of one per message.
//
// A Slab never reuses a message: each New returns a message no other call
// returned, and a block is freed by the garbage collector once none of its
// messages is reachable. Nothing a stage, an acknowledger or the source
// does with a message can therefore change another message, whenever it
// runs. The price is memory: a message kept alive (held by an acknowledger,
// say) keeps its whole block alive, so a source whose messages live very
// different lifetimes should use New.
//
// NewKeyed makes messages that carry a partition key
// (Message.SetPartitionKey) without a second allocation per message: their
// extra fields are carved from blocks of their own, as the messages are.
//
// The zero Slab is ready to use. A Slab is not safe for concurrent use:
// give each goroutine that makes messages its own.
type Slab[T any] struct {
	block  []Message[T]
	extras []extra
}

// New returns a fresh message carrying data, to be acknowledged through
// ack under the per-message identifier id, as the package's New does.
func (s *Slab[T]) New(data T, ack acker.Acknowledger, id uint64) *Message[T] {
	if len(s.block) == 0 {
		s.block = make([]Message[T], max(1, slabBytes/int(unsafe.Sizeof(Message[T]{}))))
	}
	m := &s.block[0]
	s.block = s.block[1:]
	m.Data, m.ack, m.id = data, ack, id
	return m
}

// NewKeyed is New for a message with the partition key key, as if
// SetPartitionKey(key) followed, except that the extra fields a key needs
// come from a block of about 8 KiB allocated at once (102 messages' worth)
// instead of one allocation per message. An empty key takes no extra
// fields. Each message gets extra fields of its own: what a stage sets on
// one (an error, a batch key) never shows on another.
func (s *Slab[T]) NewKeyed(data T, ack acker.Acknowledger, id uint64, key string) *Message[T] {
	m := s.New(data, ack, id)
	if key == "" {
		return m
	}
	if len(s.extras) == 0 {
		s.extras = make([]extra, max(1, slabBytes/int(unsafe.Sizeof(extra{}))))
	}
	x := &s.extras[0]
	s.extras = s.extras[1:]
	x.partKey = key
	m.aux = x
	return m
}
