package pulsar

// CloseConsumerForTest closes one open consumer of the source behind its
// stage's back, as the client or a user holding ActiveState.Consumer could,
// and reports whether there was one.
func (s *Source) CloseConsumerForTest() bool {
	s.mu.Lock()
	var c *consumer
	for k := range s.live {
		c = k
		break
	}
	s.mu.Unlock()
	if c == nil {
		return false
	}
	c.c.Close()
	return true
}

// WatchesForTest is how many reconnection watches the client holds.
func (c *Client) WatchesForTest() int {
	c.last.mu.Lock()
	defer c.last.mu.Unlock()
	return len(c.last.watches)
}
