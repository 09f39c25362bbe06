package franz

import (
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// recordPool gives franz-go the slices it decodes fetched record batches
// into (kgo.PoolRecords), and takes them back once every record of a batch
// was recycled. Without it, franz-go allocates a zeroed []kgo.Record for
// each batch (about 160 bytes a record, a large allocation for a batch of
// thousands), which the garbage collector then scans and frees.
//
// Slices are kept by capacity class (powers of two), each class in a
// sync.Pool, so that the collector can drop slices that go unused.
type recordPool struct {
	classes [recordClasses]sync.Pool
	// gets and puts count the slices handed to franz-go and taken back:
	// one each per decoded record batch, once its records were recycled.
	gets, puts atomic.Int64
}

// recordClasses bounds the classes: the largest holds 1<<(recordClasses-1)
// records. A batch larger than that (far beyond a Kafka batch's default
// size) gets a slice of its own, which is not pooled.
const recordClasses = 24

var _ kgo.PoolRecords = (*recordPool)(nil)

// recordClass returns the smallest class whose slices hold n records.
func recordClass(n int) int {
	if n <= 1 {
		return 0
	}
	return bits.Len(uint(n - 1))
}

// GetRecords returns a slice with room for n records.
func (p *recordPool) GetRecords(n int) []kgo.Record {
	p.gets.Add(1)
	c := recordClass(n)
	if c >= recordClasses {
		return make([]kgo.Record, 0, n)
	}
	if v, ok := p.classes[c].Get().(*[]kgo.Record); ok {
		return (*v)[:0]
	}
	return make([]kgo.Record, 0, 1<<c)
}

// PutRecords takes back a slice whose records were all recycled (franz-go
// zeroed each of them in Record.Recycle).
func (p *recordPool) PutRecords(s []kgo.Record) {
	p.puts.Add(1)
	// The class the slice fully covers: a slice franz-go grew beyond its
	// class goes into the class below its capacity.
	c := bits.Len(uint(cap(s))) - 1
	if c < 0 || c >= recordClasses {
		return
	}
	s = s[: 0 : 1<<c]
	p.classes[c].Put(&s)
}
