// Package undecodable holds the line the Kafka topic and topology backends
// log for a record their codec cannot decode, so that a record skipped for
// good reads the same in both.
package undecodable

import (
	"context"
	"log/slog"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/logburst"
)

// LogKafka logs, on kd, the line of rec, a record the backend's codec
// could not decode with err: the topic, the partition, the offset, the
// error and attrs. A line that follows the last of its partition by less
// than kd's interval is only counted, with its offset.
func LogKafka(ctx context.Context, kd *logburst.Keyed[int32], rec *sarama.ConsumerMessage, err error, attrs ...slog.Attr) {
	kd.Line(ctx, rec.Partition, []slog.Attr{slog.String("topic", rec.Topic), slog.Int("partition", int(rec.Partition))},
		slog.Int64Value(rec.Offset), append([]slog.Attr{slog.Int64("offset", rec.Offset), slog.Any("error", err)}, attrs...)...)
}
