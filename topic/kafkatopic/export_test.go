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
