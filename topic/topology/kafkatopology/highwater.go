package kafkatopology

import "github.com/boulevard-go/boulevard/internal/kafkaends"

// listEnds lists the log ends of the partitions the backend reads every
// Options.HighWaterInterval until stop is closed (kafkaends.Lister): Stats
// takes a partition's high-water mark as the greater of the end listed
// last and its latest fetch's, since a consumer that does not fetch (its
// buffer full, its partition paused) learns of no record produced
// meanwhile. The listing's requests go out on connections of its own
// within the backend's, each listing cut short after kafkaends.Timeout or
// as Close begins (stop), so a cluster that does not answer holds neither
// the listing nor Close.
func (b *Backend[T]) listEnds(stop <-chan struct{}) {
	l := &kafkaends.Lister{Client: b.client, Conns: b.conns, Log: b.log, Clean: b.red.Err, Lines: kafkaends.ReaderLines("kafkatopology: ")}
	l.Run(&b.ends, b.opts.HighWaterInterval, b.readPartitions, stop)
}

// readPartitions returns the partitions the backend's group readers
// claim, its broadcast readers read and its releasers claim.
func (b *Backend[T]) readPartitions() []topicPartition {
	b.mu.Lock()
	rs := make([]interface {
		appendRead([]topicPartition) []topicPartition
	}, 0, len(b.readers)+len(b.releasers))
	for c := range b.readers {
		if r, ok := c.(interface {
			appendRead([]topicPartition) []topicPartition
		}); ok {
			rs = append(rs, r)
		}
	}
	for _, r := range b.releasers {
		rs = append(rs, r)
	}
	b.mu.Unlock()
	var read []topicPartition
	for _, r := range rs {
		read = r.appendRead(read)
	}
	return read
}
