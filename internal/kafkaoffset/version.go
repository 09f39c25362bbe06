package kafkaoffset

import "github.com/IBM/sarama"

// commitVersions are the protocol versions from which sarama's offset
// manager sends a newer OffsetCommit request version, newest first.
var commitVersions = []struct {
	from    sarama.KafkaVersion
	version int16
}{
	{sarama.V2_4_0_0, 8}, // the first flexible version
	{sarama.V2_3_0_0, 7}, // group instance id
	{sarama.V2_1_0_0, 6}, // leader epoch
	{sarama.V2_0_0_0, 4},
	{sarama.V0_11_0_0, 3},
	{sarama.V0_9_0_0, 2}, // retention time instead of a commit timestamp
}

// CommitVersion is the OffsetCommit request version sarama's own offset
// manager sends for protocol version v: 1 before Kafka 0.9, 2 from 0.9, 3
// from 0.11, 4 from 2.0, 6 from 2.1, 7 from 2.3 and 8 from 2.4.
func CommitVersion(v sarama.KafkaVersion) int16 {
	for _, cv := range commitVersions {
		if v.IsAtLeast(cv.from) {
			return cv.version
		}
	}
	return 1
}
