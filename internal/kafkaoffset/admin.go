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

// StartOffsets makes sure consumer group gid has a committed offset on
// every partition of topic before its first member joins: a partition
// without one gets the log end, committed outside any group generation
// (which a group without members accepts) with the OffsetCommit request
// version of protocol version v. So a new group starts at the log end as
// of StartOffsets returning, however long the join then takes, and a group
// with committed offsets resumes from them.
//
// The commit can be refused when members elsewhere got there first; that
// refusal is returned as refused and is not a failure: the partitions
// still without an offset start at the oldest record, so nothing is missed
// either way. A failure says which step failed. Each request is retried
// (see Poll) until ctx ends, except a Denied one.
func StartOffsets(ctx context.Context, client sarama.Client, admin sarama.ClusterAdmin, topic, gid string, v sarama.KafkaVersion) (refused, err error) {
	parts, err := client.Partitions(topic)
	if err != nil {
		return nil, fmt.Errorf("listing partitions: %w", err)
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
		return nil, fmt.Errorf("fetching committed offsets: %w", err)
	}
	if len(missing) == 0 {
		return nil, nil
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
	for _, p := range missing {
		off, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			return nil, fmt.Errorf("reading the log end of partition %d: %w", p, err)
		}
		req.AddBlock(topic, p, off, 0, "")
	}
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
		return nil, fmt.Errorf("committing starting offsets: %w", err)
	}
	return refused, nil
}
