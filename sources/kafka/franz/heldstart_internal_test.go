package franz

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
)

// Guarantee: a claim held paused while it waits for its start offset
// (OffsetTimestamp, a session where another claim starts at its committed
// offset) that the member loses meanwhile resumes its partition in the
// client, which would otherwise keep it paused when the group gives it to
// the member again: the new claim would never be fetched. Here the first
// session's offsets say partition 0 is committed and partition 1 is not,
// so partition 1 waits, paused, for a listing the cluster refuses (with an
// error Kafka says to retry); the member then loses its partitions
// (ILLEGAL_GENERATION on a heartbeat) and, in the next session, where
// neither is committed, starts both at the offsets listed: every record of
// partition 1 must be handled.
func TestClaimReleasedWhileWaitingForItsStartIsFetchedWhenClaimedAgain(t *testing.T) {
	const topic, group, records = "events", "g-held-start", 5
	c := partitionsCluster(t, topic, 2, 1, records)
	var faked atomic.Bool
	c.ControlKey(int16(kmsg.OffsetFetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		resp, ok := committedFirst(req.(*kmsg.OffsetFetchRequest), group)
		if !ok {
			c.KeepControl()
			return nil, nil, false
		}
		faked.Store(true)
		return resp, nil, true
	})
	var refusing atomic.Bool
	var refused atomic.Int32
	refusing.Store(true)
	c.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !refusing.Load() {
			return nil, nil, false
		}
		refused.Add(1)
		return testbroker.RefuseListOffsets(req, kerr.LeaderNotAvailable.Code), nil, true
	})
	lose := answerNextHeartbeat(c, group, kerr.IllegalGeneration.Code, nil)
	src := groupSource(t, c, topic, group, func(o *Options) {
		o.InitialOffset, o.StartTime, o.CommitInterval = OffsetTimestamp, time.Now().Add(-time.Hour), time.Hour
	})
	var handled sync.Map
	runPipeline(t, "held-start", src, func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
		handled.Store(string(m.Data), true)
		return m.Data, nil
	})
	session := func() (gen int32, parts int) {
		if ms := src.Stats().Members; len(ms) == 1 {
			return ms[0].GenerationID, len(ms[0].Partitions)
		}
		return -1, 0
	}
	wait.For(t, "partition 1's claim to wait for a refused start offset listing", func() bool {
		_, parts := session()
		return faked.Load() && parts == 2 && refused.Load() > 0
	}, func() string { return fmt.Sprintf("stats %+v", src.Stats()) })
	firstGen, _ := session()
	lose()
	wait.For(t, "the member to claim its partitions again in a new generation", func() bool {
		gen, parts := session()
		return gen > firstGen && parts == 2
	}, func() string { return fmt.Sprintf("stats %+v", src.Stats()) })
	refusing.Store(false)
	count := func() int {
		n := 0
		handled.Range(func(any, any) bool { n++; return true })
		return n
	}
	wait.For(t, "every record of partition 1 handled", func() bool { return count() == records },
		func() string { return fmt.Sprintf("%d of %d handled, stats %+v", count(), records, src.Stats()) })
}

// committedFirst answers the first OffsetFetch of group: partition 0 of
// each topic committed at offset 0, any other partition not committed. It
// reports false for any other request.
func committedFirst(req *kmsg.OffsetFetchRequest, group string) (*kmsg.OffsetFetchResponse, bool) {
	if len(req.Groups) != 1 || req.Groups[0].Group != group {
		return nil, false
	}
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	g := kmsg.NewOffsetFetchResponseGroup()
	g.Group = group
	for _, rt := range req.Groups[0].Topics {
		t := kmsg.NewOffsetFetchResponseGroupTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		for _, part := range rt.Partitions {
			p := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			p.Partition, p.Offset, p.LeaderEpoch = part, -1, -1
			if part == 0 {
				p.Offset = 0
			}
			t.Partitions = append(t.Partitions, p)
		}
		g.Topics = append(g.Topics, t)
	}
	resp.Groups = append(resp.Groups, g)
	return resp, true
}
