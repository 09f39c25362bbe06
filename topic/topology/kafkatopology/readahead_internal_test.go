package kafkatopology

import (
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// messagesOf is what a sarama group claim and a partition consumer offer
// to read the records they fetched.
type messagesOf interface {
	Messages() <-chan *sarama.ConsumerMessage
}

// Guarantee: the records sarama buffers below a reader are bounded by
// ReadAhead together, as the letters the reader keeps ready are: each
// partition's channel gets a share of ReadAhead (one record at the
// least), whatever Config.ChannelBufferSize says (256 by default), so a
// topic of many partitions does not multiply the read-ahead by its
// partition count.
func TestReadAheadOfEveryPartitionSharesTheReadAhead(t *testing.T) {
	const parts, readAhead = 4, 8
	b := newBackend(t, testbroker.Kafka(t).ListenAddrs(), func(o *Options[msg]) {
		o.Partitions, o.ReadAhead = parts, readAhead
	})

	gr := subscribe(t, declare(t, b, topology.New("wide"))).(*groupReader[msg])
	var channels []int
	wait.Within(t, 30*time.Second, "the reader to claim every partition", func() bool {
		gr.mu.Lock()
		defer gr.mu.Unlock()
		channels = channels[:0]
		for _, c := range gr.claims {
			channels = append(channels, cap(c.hw.(messagesOf).Messages()))
		}
		return len(channels) == parts
	})
	for _, n := range channels {
		if n != readAhead/parts {
			t.Fatalf("a group reader's channels per partition hold %v records, want %d each (ReadAhead %d over %d partitions)", channels, readAhead/parts, readAhead, parts)
		}
	}

	br := subscribe(t, declare(t, b, topology.New("news").Broadcast())).(*broadcastReader[msg])
	br.mu.Lock()
	defer br.mu.Unlock()
	if len(br.parts) != parts {
		t.Fatalf("the broadcast reader consumes %d partitions, want %d", len(br.parts), parts)
	}
	for _, p := range br.parts {
		if n := cap(p.pc.Messages()); n != readAhead/parts {
			t.Fatalf("a broadcast reader's channel per partition holds %d records, want %d (ReadAhead %d over %d partitions)", n, readAhead/parts, readAhead, parts)
		}
	}
}
