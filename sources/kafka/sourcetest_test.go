package kafka_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/producer/sourcetest"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// The Kafka source passes the source conformance suite on a kfake cluster:
// two partitions (two feeds per member), one consumer group, outcomes read
// back as the group's committed offsets.
func TestConformance(t *testing.T) {
	const parts = 2
	sourcetest.Run(t, sourcetest.Harness[[]byte]{
		Feeds: parts,
		Start: func(t testing.TB, n int) sourcetest.Fixture[[]byte] {
			const group = "g-conformance"
			c := newCluster(t, parts)
			fail := &sourcetest.Failing[[]byte]{}
			return sourcetest.Fixture[[]byte]{
				NewSource: func() (producer.Source[[]byte], error) {
					src, err := kafka.New(sourceOptions(c, group))
					if err != nil {
						return nil, err
					}
					return fail.Wrap(src), nil
				},
				Publish: func(context.Context) ([]string, error) {
					produce(t, c, parts, 0, n)
					keys := make([]string, n)
					for i := range keys {
						// produce puts record i on partition i%parts.
						keys[i] = recordKey(int32(i%parts), int64(i/parts))
					}
					return keys, nil
				},
				Key: func(m *message.Message[[]byte]) string {
					md, ok := message.MetadataAs[*kafka.Metadata](m)
					if !ok {
						return "no kafka metadata"
					}
					return recordKey(md.Partition, md.Offset)
				},
				Settled: func(context.Context) (int, error) {
					n := 0
					for _, off := range committed(c, group) {
						n += int(off)
					}
					return n, nil
				},
				Fail: fail.Fail,
			}
		},
	})
}

func recordKey(p int32, off int64) string { return fmt.Sprintf("%d@%d", p, off) }
