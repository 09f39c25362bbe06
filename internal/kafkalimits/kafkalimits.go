// Package kafkalimits bounds the fields of a sarama.Config that size what
// sarama allocates. sarama checks only their lower bounds: a value past
// what make accepts panics ("makechan: size out of range") on one of
// sarama's own goroutines, where nothing can recover it, the first time
// the client connects or publishes, and a large one reserves memory for
// every connection, topic or partition. The option packages that take a
// sarama.Config refuse such values in their Validate, through Check.
package kafkalimits

import (
	"fmt"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/validate"
)

// The bounds. Each is far above sarama's default and what a client needs.
const (
	// ChannelBufferSize bounds Config.ChannelBufferSize (sarama's default
	// 256): sarama makes a channel of that many entries for every topic
	// and partition it produces to and two for every partition it
	// consumes, 512 KiB each at the bound.
	ChannelBufferSize = 1 << 16
	// OpenRequests bounds Config.Net.MaxOpenRequests (sarama's default
	// 5): sarama makes two channels of that many entries for every broker
	// connection.
	OpenRequests = 1 << 10
	// ProducerRetries bounds Config.Producer.Retry.Max (sarama's default
	// 3): sarama makes a table of that many entries (plus one) for every
	// partition it produces to.
	ProducerRetries = 1 << 10
)

// Fields says which fields Check looks at.
type Fields uint8

const (
	// Connections is Net.MaxOpenRequests: every client.
	Connections Fields = 1 << iota
	// Channels is ChannelBufferSize: a client that does not set it itself.
	Channels
	// Producer is Producer.Retry.Max: a client that produces.
	Producer
	// All is every field.
	All = Connections | Channels | Producer
)

// Check returns one error per field of c (among those fields selects) that
// is past its bound, each naming the field under prefix with sarama's
// spelling ("config.Net.MaxOpenRequests must be ≤ 1024 …"), rule "lte".
// A nil c has none.
func Check(prefix string, c *sarama.Config, fields Fields) []error {
	if c == nil {
		return nil
	}
	var errs []error
	check := func(f Fields, name string, v, limit int, what string) {
		if fields&f != 0 && v > limit {
			errs = append(errs, validate.Field(prefix+"."+name, "lte",
				fmt.Sprintf("must be ≤ %d (sarama allocates %s)", limit, what)))
		}
	}
	check(Channels, "ChannelBufferSize", c.ChannelBufferSize, ChannelBufferSize,
		"a channel of that many entries per topic and partition")
	check(Connections, "Net.MaxOpenRequests", c.Net.MaxOpenRequests, OpenRequests,
		"two channels of that many entries per broker connection")
	check(Producer, "Producer.Retry.Max", c.Producer.Retry.Max, ProducerRetries,
		"a table of that many entries per partition it produces to")
	return errs
}

// ShareChannels lowers cfg.ChannelBufferSize, which sizes the channel a
// sarama consumer fills for each partition it reads, to a share of
// capacity over the parts partitions of the topic a subscriber reads (at
// least 1 a partition), so that the records sarama buffers for the
// subscriber stay within the capacity that bounds the subscriber's own
// queue instead of growing with the partition count. A smaller
// ChannelBufferSize is kept. cfg must be the subscriber's own, and the
// consumer must not have started a partition yet: sarama reads the field
// as it starts each one.
func ShareChannels(cfg *sarama.Config, parts, capacity int) {
	cfg.ChannelBufferSize = min(cfg.ChannelBufferSize, max(1, capacity/max(1, parts)))
}
