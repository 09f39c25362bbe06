//lint:file-ignore U1000 the mirrored types' fields are there for their size and pointer layout, never read

package main

import "testing"

// extraLikeBoulevard mirrors message's rarely set fields (ack data, error,
// partition key, batcher, batch key): 80 bytes.
type extraLikeBoulevard struct {
	ackData  any
	err      error
	partKey  string
	batcher  string
	batchKey string
}

// msg40Header is a Message[[]byte] with a 40-byte header: the
// acknowledger, the id and one interface shared by the metadata, the ack
// data and the rarely set fields (64 bytes).
type msg40Header struct {
	data   []byte
	ack    any
	id     uint64
	shared any
}

var (
	sink32    *msg
	sink64    *msg64
	sink88    *msgLikeBoulevard
	sink40    *msg40Header
	sinkExtra *extraLikeBoulevard
)

// BenchmarkMessageAllocation is what allocating one message costs by its
// layout, in a loop that does nothing else: the comparison's 32-byte msg,
// a 64-byte message, one laid out as Boulevard's Message[[]byte] (88
// bytes, the 96-byte size class), and one with a 40-byte header, alone
// and with the rarely set fields a source that sets both metadata and ack
// data would need beside it.
func BenchmarkMessageAllocation(b *testing.B) {
	data := []byte("0123456789abcdef")
	layouts := []struct {
		name  string
		alloc func(id uint64)
	}{
		{"32B", func(id uint64) { sink32 = &msg{id: id, data: data} }},
		{"64B", func(id uint64) { sink64 = &msg64{id: id, data: data} }},
		{"88B-as-Boulevard", func(id uint64) { sink88 = &msgLikeBoulevard{id: id, data: data} }},
		{"40B-header", func(id uint64) { sink40 = &msg40Header{id: id, data: data} }},
		{"40B-header+extra", func(id uint64) {
			x := &extraLikeBoulevard{partKey: "k"}
			sinkExtra = x
			sink40 = &msg40Header{id: id, data: data, shared: x}
		}},
	}
	for _, l := range layouts {
		b.Run(l.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := range b.N {
				l.alloc(uint64(i))
			}
		})
	}
}
