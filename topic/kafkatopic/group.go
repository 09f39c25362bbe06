package kafkatopic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/kafkaoffset"
	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/topic"
)

// The lines a Subscribe logs when it starts a new group on a topic that
// holds records.
const (
	msgStartAtEnd    = "kafkatopic: a new consumer group starts at the log end of its topic; the records before it are not delivered to the group (Options.InitialOffset earliest delivers them)"
	msgStartAtOldest = "kafkatopic: a new consumer group starts at the oldest record of its topic; the records already there are delivered to the group"
)

// startOffsets makes sure consumer group gid has a committed offset on
// every partition of kname before its first member joins: partitions
// without one get the current log end or, with Options.InitialOffset
// earliest, the log start. So a new group starts at the log end as of
// Subscribe returning (or at the oldest record kept then), and nothing
// published after that is missed, however long the join then takes; a
// group with committed offsets (from an earlier run, or members in other
// processes) resumes from them. It logs one INFO line when records
// precede the log end where it starts a group.
func (b *Backend[T]) startOffsets(ctx context.Context, kname, gid string) error {
	at, msg := int64(sarama.OffsetNewest), msgStartAtEnd
	if b.opts.InitialOffset == kafka.OffsetEarliest {
		at, msg = sarama.OffsetOldest, msgStartAtOldest
	}
	var start kafkaoffset.Start
	err := b.bounded(ctx, "resolving the starting offsets of group "+strconv.Quote(gid), func() error {
		var err error
		start, err = kafkaoffset.StartOffsets(ctx, b.client, b.admin, kname, gid, at, b.cfg.Version)
		return err
	})
	if errors.Is(err, ErrAdmin) || errors.Is(err, topic.ErrTopicClosed) {
		return err
	}
	if err != nil {
		return fmt.Errorf("%w: group %q on topic %q: %w", ErrAdmin, gid, kname, b.red.Err(err))
	}
	if start.Refused != nil {
		// The group has members elsewhere (their commit came first, or is
		// about to): a partition still without an offset is read from the
		// oldest record kept, so nothing published is missed.
		b.log.Warn("kafkatopic: the starting offsets of a new consumer group were refused; partitions without a committed offset start at the oldest record",
			slog.String("topic", kname), slog.String("group", gid), slog.Any("error", b.red.Err(start.Refused)))
	}
	if start.Backlog > 0 {
		b.log.Info(msg, slog.String("topic", kname), slog.String("group", gid), slog.Int64("records", start.Backlog))
	}
	return nil
}
