package producer

// NamedFeedStats are one feed's name and counters, as Stage.FeedStats
// reports them.
type NamedFeedStats struct {
	// Name is the name the source registered the feed with (for example
	// "<topic>/<partition>" for a Kafka partition).
	Name string
	FeedStats
}

// FeedStats returns the counters of the feeds the source's current run
// has registered and not closed, in the order they were registered; none
// between runs. The counters of a feed count from its registration, so a
// source that re-creates a feed (after a restart or a rebalance) starts
// it from zero. Safe to call from any goroutine; it takes the lock of the
// stage's feed list once, and each feed's counter lock once, none of
// which is held while user code runs: it never waits for a delivery under
// way, nor for the processors' PartitionBy that one runs.
func (s *Stage[T]) FeedStats() []NamedFeedStats {
	s.fmu.Lock()
	feeds := make([]*Feed[T], 0, len(s.feeds))
	for _, f := range s.feeds {
		if !f.closed.Load() {
			feeds = append(feeds, f)
		}
	}
	s.fmu.Unlock()
	if len(feeds) == 0 {
		return nil
	}
	out := make([]NamedFeedStats, len(feeds))
	for i, f := range feeds {
		out[i] = NamedFeedStats{Name: f.name, FeedStats: f.Stats()}
	}
	return out
}
