package franz

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Guarantee: undecodable takes franz-go's errors for fetched bytes it
// cannot decode (its untyped ones, as a CRC mismatch, and
// *kgo.ErrDecompressTooLarge) and none of the fetch errors franz-go
// types: a broker's code, a data loss notice, the client closing or the
// poll ending; so a member fails for a batch that cannot be decoded and
// for nothing else on that path.
func TestUndecodableTakesDecodingErrorsOnly(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{errors.New("encoded crc 1a does not match calculated crc 2b"), true},
		{fmt.Errorf("unable to decompress batch: %w", errors.New("snappy: corrupt input")), true},
		{&kgo.ErrDecompressTooLarge{Topic: "t", Partition: 0, Offset: 5}, true},
		{kerr.CorruptMessage, false},
		{fmt.Errorf("fetch: %w", kerr.NotLeaderForPartition), false},
		{&kgo.ErrDataLoss{Topic: "t", Partition: 0, ConsumedTo: 5, ResetTo: 3}, false},
		{kgo.ErrClientClosed, false},
		{context.Canceled, false},
		{context.DeadlineExceeded, false},
	} {
		if got := undecodable(c.err); got != c.want {
			t.Errorf("undecodable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
