package kafkatopic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/kafkaoffset"
	"github.com/boulevard-go/boulevard/topic"
)

// startOffsets makes sure consumer group gid has a committed offset on
// every partition of kname before its first member joins: partitions
// without one get the current log end. So a new group starts at the log
// end as of Subscribe returning, and nothing published after that is
// missed, however long the join then takes; a group with committed offsets
// (from an earlier run, or members in other processes) resumes from them.
func (b *Backend[T]) startOffsets(ctx context.Context, kname, gid string) error {
	var refused error
	err := b.bounded(ctx, "resolving the starting offsets of group "+strconv.Quote(gid), func() error {
		start, err := kafkaoffset.StartOffsets(ctx, b.client, b.admin, kname, gid, sarama.OffsetNewest, b.cfg.Version)
		refused = start.Refused
		return err
	})
	if errors.Is(err, ErrAdmin) || errors.Is(err, topic.ErrTopicClosed) {
		return err
	}
	if err != nil {
		return fmt.Errorf("%w: group %q on topic %q: %w", ErrAdmin, gid, kname, b.red.err(err))
	}
	if refused != nil {
		// The group has members elsewhere (their commit came first, or is
		// about to): a partition still without an offset is read from the
		// oldest record kept, so nothing published is missed.
		b.log.Warn("kafkatopic: the starting offsets of a new consumer group were refused; partitions without a committed offset start at the oldest record",
			slog.String("topic", kname), slog.String("group", gid), slog.Any("error", b.red.err(refused)))
	}
	return nil
}
