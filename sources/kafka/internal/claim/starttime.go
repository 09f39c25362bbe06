package claim

import (
	"context"
	"errors"
	"fmt"
)

// Lister lists one offset for each of parts with ListOffsets requests: by
// time (the first record at or after a timestamp, -1 when no record is that
// late) or the end offset (the offset the next record appended gets).
type Lister[K comparable] func(ctx context.Context, parts []K) (map[K]int64, error)

// StartOffsets returns where each of parts starts for a start time: at its
// first record at or after the time, or at its end offset when no record is
// that late. byTime lists by the start time, end lists the end offsets.
//
// The partitions the first listing by time finds no record for are listed
// at the end, then by time again, and start where that second listing
// finds a record or else at the end listed. A record appended between the
// first listing and the end listing gets an offset below that end, and the
// second listing finds it; a record appended after the end listing gets an
// offset at or above that end, and is read from there. Starting at the end
// as soon as the first listing finds nothing would skip the former.
func StartOffsets[K comparable](ctx context.Context, parts []K, byTime, end Lister[K]) (map[K]int64, error) {
	offs, err := listAll(ctx, parts, byTime)
	if err != nil {
		return nil, err
	}
	var late []K
	for _, k := range parts {
		if offs[k] < 0 {
			late = append(late, k)
		}
	}
	if len(late) == 0 {
		return offs, nil
	}
	ends, err := listAll(ctx, late, end)
	if err != nil {
		return nil, err
	}
	again, err := listAll(ctx, late, byTime)
	if err != nil {
		return nil, err
	}
	for _, k := range late {
		offs[k] = ends[k]
		if o := again[k]; o >= 0 {
			offs[k] = o
		}
	}
	return offs, nil
}

// listAll calls list and checks that it answered for each of parts.
func listAll[K comparable](ctx context.Context, parts []K, list Lister[K]) (map[K]int64, error) {
	offs, err := list(ctx, parts)
	if err != nil {
		return nil, err
	}
	for _, k := range parts {
		if _, ok := offs[k]; !ok {
			return nil, fmt.Errorf("%w: %v", ErrNotListed, k)
		}
	}
	return offs, nil
}

// ErrNotListed is StartOffsets' error when a listing does not answer for a
// partition it was asked about.
var ErrNotListed = errors.New("kafka: the ListOffsets answer leaves out a partition")

// ErrStartRefused is wrapped by the error a member fails with when the
// cluster refuses to list where its claims start, or (sarama) to let a
// claim's consumer move there, with an error Kafka says not to retry
// (other than an authorization refusal, which is ErrDenied).
var ErrStartRefused = errors.New("kafka: start offsets refused")

// ErrRewindRefused is wrapped by the error a member fails with when the
// cluster refuses to let a claim read its partition again from a failed
// offset (a redelivery's rewind) with an error Kafka says not to retry
// (other than an authorization refusal, which is ErrDenied).
var ErrRewindRefused = errors.New("kafka: rewind refused")

// ErrFetchRefused is wrapped by the error a member fails with when the
// cluster answers a claimed partition's fetch with an error Kafka says
// not to retry (UNSUPPORTED_COMPRESSION_TYPE, INVALID_RECORD,
// UNSUPPORTED_VERSION, ...), other than an authorization refusal, which
// is ErrDenied, UNKNOWN_SERVER_ERROR, which brokers send for passing
// faults, and OFFSET_OUT_OF_RANGE (ErrOffsetOutOfRange).
var ErrFetchRefused = errors.New("kafka: fetch refused")

// ErrCorruptBatch is wrapped by the error a member fails with when a
// claimed partition holds a record batch the client cannot decode (its
// CRC does not match, a length or a compression that does not hold), or
// the broker answers its fetch with CORRUPT_MESSAGE: fetching again
// returns the same bytes, and skipping them would lose their records.
var ErrCorruptBatch = errors.New("kafka: record batch cannot be decoded")

// ErrOffsetOutOfRange is wrapped by the error a member fails with when
// the offset a claim is to read from is out of its partition's range
// (retention deleted the committed offset's record) and the member is not
// to reset it (sarama's Consumer.Group.ResetInvalidOffsets false).
var ErrOffsetOutOfRange = errors.New("kafka: offset out of range")
