package franz

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Guarantee: the member's error for a fetch or a start offset listing the
// cluster refuses for good, and for a fetch that cannot be decoded, wraps
// the sentinel a caller matches with errors.Is (ErrFetchRefused,
// ErrStartRefused, ErrCorruptBatch; ErrDenied, and not the others, for an
// authorization refusal) and franz-go's error.
func TestRefusalsWrapTheirSentinelAndTheClientsError(t *testing.T) {
	decompress := &kgo.ErrDecompressTooLarge{Topic: "media", Partition: 3, Offset: 42}
	for _, c := range []struct {
		name      string
		err       error
		want, not error
		clientErr error
	}{
		{"fetch refused", refusedFetch("media", 3, kerr.InvalidRecord), ErrFetchRefused, ErrDenied, kerr.InvalidRecord},
		{"fetch denied", refusedFetch("media", 3, kerr.TopicAuthorizationFailed), ErrDenied, ErrFetchRefused, kerr.TopicAuthorizationFailed},
		{"batch corrupt", corruptFetch("media", 3, 42, decompress), ErrCorruptBatch, ErrFetchRefused, decompress},
		{"batch corrupt at an unknown offset", corruptFetch("media", 3, -1, decompress), ErrCorruptBatch, ErrFetchRefused, decompress},
		{"start refused", refusedStarts(kerr.InvalidRequest), ErrStartRefused, ErrDenied, kerr.InvalidRequest},
		{"start denied", refusedStarts(kerr.TopicAuthorizationFailed), ErrDenied, ErrStartRefused, kerr.TopicAuthorizationFailed},
	} {
		if !errors.Is(c.err, c.want) || !errors.Is(c.err, c.clientErr) || errors.Is(c.err, c.not) {
			t.Errorf("%s: %v, want an error wrapping %v and %v, not %v", c.name, c.err, c.want, c.clientErr, c.not)
		}
	}
}
