package kafkatopic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/kafkaoffset"
)

// startOffsets makes sure consumer group gid has a committed offset on
// every partition of kname before its first member joins: partitions
// without one get the current log end. So a new group starts at the log
// end as of Subscribe returning, and nothing published after that is
// missed, however long the join then takes; a group with committed offsets
// (from an earlier run, or members in other processes) resumes from them.
func (b *Backend[T]) startOffsets(ctx context.Context, kname, gid string) error {
	fail := func(what string, err error) error {
		return fmt.Errorf("%w: %s for group %q on topic %q: %w", ErrAdmin, what, gid, kname, b.red.err(err))
	}
	parts, err := b.client.Partitions(kname)
	if err != nil {
		return fail("listing partitions", err)
	}
	var missing []int32
	if err := poll(ctx, func() (bool, error) {
		resp, err := b.admin.ListConsumerGroupOffsets(gid, map[string][]int32{kname: parts})
		if errors.Is(err, sarama.ErrGroupIDNotFound) {
			missing = append(missing[:0], parts...) // a group never seen
			return true, nil
		}
		if err != nil {
			return false, nil // retried: the coordinator may be moving or loading
		}
		if !errors.Is(resp.Err, sarama.ErrNoError) {
			return false, nil
		}
		missing = missing[:0]
		for _, p := range parts {
			if blk := resp.GetBlock(kname, p); blk == nil || blk.Offset < 0 {
				missing = append(missing, p)
			}
		}
		return true, nil
	}, func(err error) error { return fail("fetching committed offsets", err) }); err != nil {
		return err
	}
	if len(missing) == 0 {
		return nil
	}
	req := &sarama.OffsetCommitRequest{
		// The configured version is at least 0.10.1 (Options), so the
		// request is version 2 or later: it carries no commit timestamp.
		Version:                 kafkaoffset.CommitVersion(b.cfg.Version),
		ConsumerGroup:           gid,
		ConsumerGroupGeneration: -1, // a commit outside any generation, accepted while the group is empty
		RetentionTime:           -1,
	}
	for _, p := range missing {
		off, err := b.client.GetOffset(kname, p, sarama.OffsetNewest)
		if err != nil {
			return fail(fmt.Sprintf("reading the log end of partition %d", p), err)
		}
		req.AddBlock(kname, p, off, 0, "")
	}
	var refused error
	err = poll(ctx, func() (bool, error) {
		coord, err := b.client.Coordinator(gid)
		if err != nil {
			return false, nil
		}
		resp, err := coord.CommitOffset(req)
		if err != nil {
			_ = coord.Close()
			return false, nil
		}
		for _, p := range missing {
			kerr := resp.Errors[kname][p]
			switch {
			case errors.Is(kerr, sarama.ErrNoError):
			case errors.Is(kerr, sarama.ErrNotCoordinatorForConsumer), errors.Is(kerr, sarama.ErrConsumerCoordinatorNotAvailable),
				errors.Is(kerr, sarama.ErrOffsetsLoadInProgress):
				_ = b.client.RefreshCoordinator(gid)
				return false, nil
			default:
				refused = kerr
				return true, nil
			}
		}
		return true, nil
	}, func(err error) error { return fail("committing starting offsets", err) })
	if err != nil {
		return err
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
