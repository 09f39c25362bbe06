package kafkatopic

import (
	"errors"
	"testing"
	"time"

	"github.com/IBM/sarama"
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
