package kafkarefusal

import (
	"errors"
	"fmt"

	"github.com/IBM/sarama"
)

// CorruptFetch is the error of a fetch of topic/part from offset at
// (negative: not known) whose answer cannot be decoded (SaramaCorrupt):
// kind, the caller's sentinel, naming the partition and the offset, and
// wrapping err. An answer sarama refused for a length past
// sarama.MaxResponseSize is not corrupt: the error says so, and which
// limit to raise.
func CorruptFetch(kind error, topic string, part int32, at int64, err error) error {
	where := fmt.Sprintf("fetching partition %q/%d", topic, part)
	if at >= 0 {
		where += fmt.Sprintf(" from offset %d", at)
	}
	if n, ok := responseTooLarge(err); ok {
		return fmt.Errorf("%w: %s: the broker's answer of %d bytes is larger than sarama.MaxResponseSize (%d): raise it above the largest record batch of the topic: %w",
			kind, where, n, sarama.MaxResponseSize, err)
	}
	return fmt.Errorf("%w: %s: %w", kind, where, err)
}

// responseTooLarge reports whether err is sarama's refusal of an answer
// for its length, and that length, when it is past sarama.MaxResponseSize
// (sarama gives one error for a length too large or too small).
func responseTooLarge(err error) (int32, bool) {
	var pde sarama.PacketDecodingError
	if !errors.As(err, &pde) {
		return 0, false
	}
	var n int32
	if _, serr := fmt.Sscanf(pde.Info, "message of length %d too large or too small", &n); serr != nil {
		return 0, false
	}
	return n, n > sarama.MaxResponseSize
}
