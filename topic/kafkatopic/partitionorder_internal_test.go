package kafkatopic

import (
	"errors"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/kafkaoffset"
)

// Guarantee: of broadcast subscribers that read a partition at the same
// position and high-water mark, the one whose fetches fail is listed
// first, whichever the topic holds first: the first listed of each
// partition, which the metrics export, does not change from one Stats to
// the next.
func TestTiedReadersOfAPartitionListTheOneWhoseFetchesFailFirst(t *testing.T) {
	b := &Backend[int]{cfg: sarama.NewConfig()}
	tp := &kTopic[int]{b: b, kname: "t", members: map[*member[int]]struct{}{}, broadcasts: map[*bsub[int]]struct{}{}}
	failing := fetchErr{err: errors.New("denied"), at: time.Now()}
	for _, fe := range []fetchErr{{}, failing, {}, {}} {
		s := &bsub[int]{t: tp, parts: map[int32]*bpart{0: {hw: fixedHW(10), pos: 10, fetchErr: fe}}}
		tp.broadcasts[s] = struct{}{}
	}
	for range 50 {
		ps := tp.partitions()
		if len(ps) != 4 || ps[0].FetchErr == nil {
			t.Fatalf("partitions() = %+v, want 4, the one whose fetches fail first", ps)
		}
	}
}

// fixedHW is a consumer whose latest fetch gave high-water mark h.
type fixedHW int64

func (h fixedHW) HighWaterMarkOffset() int64 { return int64(h) }

// Guarantee: of the members of a group that claim one partition at once
// (for a moment of a rebalance), the one furthest ahead (greatest
// Committed, then HighWater) is listed first, whichever the topic holds
// first; of broadcast subscribers, each reading the partition all along,
// the one furthest behind (least Committed, then HighWater). The first
// listed of each group and partition is the one the metrics export.
func TestReadersOfAPartitionListTheGroupsFurthestAheadAndTheBroadcastFurthestBehindFirst(t *testing.T) {
	b := &Backend[int]{cfg: sarama.NewConfig()}
	tp := &kTopic[int]{b: b, kname: "t", members: map[*member[int]]struct{}{}, broadcasts: map[*bsub[int]]struct{}{}}
	for _, pos := range []int64{3, 7, 5} {
		m := &member[int]{t: tp, gid: "g", claims: map[*kafkaoffset.Claim]claimFigures{
			kafkaoffset.New(nil, "t", 0): {committed: pos, start: pos, hw: fixedHW(10)}}, fetchErrs: map[int32]fetchErr{}}
		tp.members[m] = struct{}{}
		s := &bsub[int]{t: tp, parts: map[int32]*bpart{0: {hw: fixedHW(10), pos: pos}}}
		tp.broadcasts[s] = struct{}{}
	}
	for range 50 {
		ps := tp.partitions()
		if len(ps) != 6 || ps[0].Group != "" || ps[0].Committed != 3 || ps[3].Group != "g" || ps[3].Committed != 7 {
			t.Fatalf("partitions() = %+v, want the broadcast subscriber at 3 first, then the member at 7", ps)
		}
	}
}
