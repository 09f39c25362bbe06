package kafkaoffset_test

import (
	"testing"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/kafkaoffset"
)

// Guarantee: the OffsetCommit version is the one sarama's offset manager
// sends for each protocol version, at and just below every boundary.
func TestCommitVersionFollowsSarama(t *testing.T) {
	for _, tc := range []struct {
		v    sarama.KafkaVersion
		want int16
	}{
		{sarama.V0_8_2_2, 1},
		{sarama.V0_9_0_0, 2},
		{sarama.V0_10_2_0, 2},
		{sarama.V0_11_0_0, 3},
		{sarama.V1_1_1_0, 3},
		{sarama.V2_0_0_0, 4},
		{sarama.V2_0_1_0, 4},
		{sarama.V2_1_0_0, 6},
		{sarama.V2_2_0_0, 6},
		{sarama.V2_3_0_0, 7},
		{sarama.V2_4_0_0, 8},
		{sarama.V3_6_0_0, 8},
		{sarama.DefaultVersion, 8},
	} {
		if got := kafkaoffset.CommitVersion(tc.v); got != tc.want {
			t.Errorf("CommitVersion(%s) = %d, want %d", tc.v, got, tc.want)
		}
	}
}
