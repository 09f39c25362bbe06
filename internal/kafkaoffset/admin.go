package kafkaoffset

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/kafkarefusal"
)

// Denied reports whether err is Kafka refusing the client's credentials or
// its permissions on a topic, group or the cluster (kafkarefusal.Denied,
// for sarama's errors).
func Denied(err error) bool { return kafkarefusal.Denied(err, kafkarefusal.Sarama) }

// Poll calls try until it reports done, waiting between calls from 1ms,
// doubling, up to 100ms. An error of try is taken as passing (a
// coordinator moving or loading) and try is called again, unless it is
// Denied: Poll then returns it at once. When ctx ends first, Poll returns
// ctx.Err() and the last error try returned, joined.
func Poll(ctx context.Context, try func() (done bool, err error)) error {
	wait := time.Millisecond
	var last error
	for {
		done, err := try()
		if done {
			return nil
		}
		if Denied(err) {
			return err
		}
		if err != nil {
			last = err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(ctx.Err(), last)
		case <-t.C:
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// Start is what [StartOffsets] did.
type Start struct {
	// Backlog is how many records the partitions given a starting offset
	// held when it was committed (the log end less the log start, summed
	// over them): the records a group starting at the log end is not
	// delivered, and those one starting at the oldest record is. Zero
	// when no offset was committed (every partition had one, or Refused).
	Backlog int64
	// Refused is the commit's refusal when members elsewhere got there
	// first. It is not a failure: the partitions still without an offset
	// start at the oldest record, so nothing is missed either way.
	Refused error
}

// StartOffsets makes sure consumer group gid has a committed offset on
// every partition of topic before its first member joins: a partition
// without one gets its log end (at sarama.OffsetNewest) or its log start
// (at sarama.OffsetOldest), committed outside any group generation (which
// a group without members accepts) with the OffsetCommit request version
// of protocol version v. So a new group starts at the log end as of
// StartOffsets returning, or at the oldest record the log keeps then,
// however long the join then takes, and a group with committed offsets
// resumes from them: a committed offset is never moved.
//
// The commit can be refused when members elsewhere got there first; that
// refusal is returned in Start.Refused (see there). A failure says which
// step failed. Each request is retried (see Poll) until ctx ends, except a
// Denied one.
func StartOffsets(ctx context.Context, client sarama.Client, admin sarama.ClusterAdmin, topic, gid string, at int64, v sarama.KafkaVersion) (Start, error) {
	if at != sarama.OffsetNewest && at != sarama.OffsetOldest {
		return Start{}, fmt.Errorf("starting offsets at %d: neither sarama.OffsetNewest nor sarama.OffsetOldest", at)
	}
	parts, err := client.Partitions(topic)
	if err != nil {
		return Start{}, fmt.Errorf("listing partitions: %w", err)
	}
	var missing []int32
	if err := Poll(ctx, func() (bool, error) {
		resp, err := admin.ListConsumerGroupOffsets(gid, map[string][]int32{topic: parts})
		if errors.Is(err, sarama.ErrGroupIDNotFound) {
			missing = append(missing[:0], parts...) // a group never seen
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if !errors.Is(resp.Err, sarama.ErrNoError) {
			return false, resp.Err
		}
		missing = missing[:0]
		for _, p := range parts {
			if blk := resp.GetBlock(topic, p); blk == nil || blk.Offset < 0 {
				missing = append(missing, p)
			}
		}
		return true, nil
	}); err != nil {
		return Start{}, fmt.Errorf("fetching committed offsets: %w", err)
	}
	if len(missing) == 0 {
		return Start{}, nil
	}
	req := &sarama.OffsetCommitRequest{
		// Both backends raise the protocol version to 0.10.1 or later, so
		// the request is version 2 or later: it carries no commit
		// timestamp.
		Version:                 CommitVersion(v),
		ConsumerGroup:           gid,
		ConsumerGroupGeneration: -1, // outside any generation
		RetentionTime:           -1,
	}
	var backlog int64
	for _, p := range missing {
		end, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			return Start{}, fmt.Errorf("reading the log end of partition %d: %w", p, err)
		}
		start, err := client.GetOffset(topic, p, sarama.OffsetOldest)
		if err != nil {
			return Start{}, fmt.Errorf("reading the log start of partition %d: %w", p, err)
		}
		backlog += max(end-start, 0)
		off := end
		if at == sarama.OffsetOldest {
			off = start
		}
		req.AddBlock(topic, p, off, 0, "")
	}
	var refused error
	err = Poll(ctx, func() (bool, error) {
		coord, err := client.Coordinator(gid)
		if err != nil {
			return false, err
		}
		resp, err := coord.CommitOffset(req)
		if err != nil {
			_ = client.RefreshCoordinator(gid)
			return false, err
		}
		for _, p := range missing {
			kerr := resp.Errors[topic][p]
			switch {
			case errors.Is(kerr, sarama.ErrNoError):
			case errors.Is(kerr, sarama.ErrNotCoordinatorForConsumer), errors.Is(kerr, sarama.ErrConsumerCoordinatorNotAvailable),
				errors.Is(kerr, sarama.ErrOffsetsLoadInProgress):
				_ = client.RefreshCoordinator(gid)
				return false, kerr
			case Denied(kerr):
				return false, kerr
			default:
				refused = kerr
				return true, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return Start{}, fmt.Errorf("committing starting offsets: %w", err)
	}
	if refused != nil {
		return Start{Refused: refused}, nil
	}
	return Start{Backlog: backlog}, nil
}
