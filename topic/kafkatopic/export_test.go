package kafkatopic

// ReadAhead returns, for every live balanced member of b's topics, how
// many fetched records wait in its queue.
func ReadAhead[T any](b *Backend[T]) []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []int
	for t := range b.topics {
		t.mu.Lock()
		for m := range t.members {
			m.mu.Lock()
			out = append(out, len(m.queue)-m.head)
			m.mu.Unlock()
		}
		t.mu.Unlock()
	}
	return out
}

// The lines a Subscribe logs when it starts a new group on a topic that
// holds records.
const (
	MsgStartAtEnd    = msgStartAtEnd
	MsgStartAtOldest = msgStartAtOldest
)

// ChannelBuffers returns, for every live balanced member and broadcast
// subscriber of b's topics, the capacity of the channel its client's
// consumer fills for each partition it reads.
func ChannelBuffers[T any](b *Backend[T]) (members, broadcasts []int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for t := range b.topics {
		t.mu.Lock()
		for m := range t.members {
			members = append(members, m.client.Config().ChannelBufferSize)
		}
		for s := range t.broadcasts {
			broadcasts = append(broadcasts, s.client.Config().ChannelBufferSize)
		}
		t.mu.Unlock()
	}
	return members, broadcasts
}
