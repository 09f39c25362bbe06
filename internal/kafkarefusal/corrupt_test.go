package kafkarefusal

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/IBM/sarama"
)

// Guarantee: the error of a fetch whose answer cannot be decoded names the
// partition and, when known, the offset, and wraps the caller's sentinel
// and the client's error; an answer sarama refused for a length past
// sarama.MaxResponseSize says that it is too large and which limit to
// raise, as the Kafka source, topic backend and topology backend report
// it.
func TestCorruptFetchNamesAnAnswerPastMaxResponseSize(t *testing.T) {
	errCorrupt := errors.New("record batch cannot be decoded")
	tooLarge := sarama.PacketDecodingError{Info: fmt.Sprintf("message of length %d too large or too small", sarama.MaxResponseSize+1)}
	for _, c := range []struct {
		name      string
		at        int64
		err       error
		want, not string
	}{
		{"too large, wrapped as sarama reports it", 42, &sarama.ConsumerError{Topic: "media", Partition: 3, Err: tooLarge},
			fmt.Sprintf(`fetching partition "media"/3 from offset 42: the broker's answer of %d bytes is larger than sarama.MaxResponseSize (%d): raise it`,
				sarama.MaxResponseSize+1, sarama.MaxResponseSize), ""},
		{"too small", -1, sarama.PacketDecodingError{Info: "message of length 3 too large or too small"},
			`record batch cannot be decoded: fetching partition "media"/3: kafka: error decoding packet: message of length 3`, "MaxResponseSize"},
		{"at the partition's first offset", 0, sarama.PacketDecodingError{Info: "CRC didn't match"},
			`fetching partition "media"/3 from offset 0: kafka: error decoding packet`, "MaxResponseSize"},
		{"a CRC that does not match", 7, sarama.PacketDecodingError{Info: "CRC didn't match"},
			`fetching partition "media"/3 from offset 7: kafka: error decoding packet: CRC didn't match`, "MaxResponseSize"},
	} {
		err := CorruptFetch(errCorrupt, "media", 3, c.at, c.err)
		var pde sarama.PacketDecodingError
		if !errors.Is(err, errCorrupt) || !errors.As(err, &pde) {
			t.Errorf("%s: %v does not wrap the sentinel and sarama's error", c.name, err)
		}
		if msg := err.Error(); !strings.Contains(msg, c.want) || c.not != "" && strings.Contains(msg, c.not) {
			t.Errorf("%s: %q, want it to say %q and not %q", c.name, msg, c.want, c.not)
		}
	}
}
