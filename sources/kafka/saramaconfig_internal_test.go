package kafka

import (
	"testing"

	"github.com/IBM/sarama"
)

// Guarantee: the sarama config the source runs with sets what the source
// owns, whatever the user's config says: sarama's channel holds half a
// partition's permit window (at least 1), so that the read-ahead stays
// within two windows plus half a window plus one fetch; sarama commits
// nothing itself (the source sends its own commits); consumer errors come
// back to the source; and InitialOffset chooses sarama's initial offset.
func TestTheSaramaConfigKeepsWhatTheSourceOwns(t *testing.T) {
	user := sarama.NewConfig()
	user.ChannelBufferSize = 4096
	user.Consumer.Offsets.AutoCommit.Enable = true
	user.Consumer.Return.Errors = false
	for _, c := range []struct {
		window, buffer int
		initial        string
		offset         int64
	}{
		{512, 256, OffsetEarliest, sarama.OffsetOldest},
		{101, 50, OffsetTimestamp, sarama.OffsetNewest},
		{1, 1, OffsetEarliest, sarama.OffsetOldest},
	} {
		o := Options{Config: user, InitialOffset: c.initial}.WithDefaults()
		cfg := o.saramaConfig(c.window)
		if cfg.ChannelBufferSize != c.buffer {
			t.Errorf("window %d: sarama's channel holds %d, want %d (half the window, at least 1)", c.window, cfg.ChannelBufferSize, c.buffer)
		}
		if cfg.Consumer.Offsets.AutoCommit.Enable || !cfg.Consumer.Return.Errors {
			t.Errorf("window %d: AutoCommit.Enable %v, Return.Errors %v; want false, true", c.window, cfg.Consumer.Offsets.AutoCommit.Enable, cfg.Consumer.Return.Errors)
		}
		if cfg.Consumer.Offsets.Initial != c.offset {
			t.Errorf("InitialOffset %q: sarama's initial offset %d, want %d", c.initial, cfg.Consumer.Offsets.Initial, c.offset)
		}
	}
	if user.ChannelBufferSize != 4096 || !user.Consumer.Offsets.AutoCommit.Enable || user.Consumer.Return.Errors {
		t.Error("the source changed the config the user gave it")
	}
}
