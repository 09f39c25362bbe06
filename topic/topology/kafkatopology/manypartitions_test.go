package kafkatopology

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: a group reader of a topic of many partitions whose user an
// ACL change denies READ, its partitions' fetches refused alike, logs
// them on one WARN line naming the first partition, not one per
// partition.
func TestAReaderDeniedReadOnManyPartitionsLogsTheirFetchErrorsOnOneLine(t *testing.T) {
	const parts = 256
	k := testbroker.KafkaWithACLs(t)
	logs := &logtest.Lines{}
	b := newLoggedBackend(t, k.ListenAddrs(), logs, func(o *Options[msg]) { o.Config, o.Partitions = k.Config(), parts })
	q := declare(t, b, topology.New("acl-many"))
	kname := q.(*queues[msg]).main
	subscribe(t, q)
	all := func() string { return strings.Join(logs.All(), "") }
	wait.For(t, "the reader's session to start", func() bool { return logs.Count(SessionStartedLog) > 0 }, all)

	k.Deny(t, kname, sarama.AclOperationRead)
	refused := func() int {
		n := 0
		for _, ps := range b.Stats().Partitions {
			if ps.Topic == kname && errors.Is(ps.FetchErr, sarama.ErrTopicAuthorizationFailed) {
				n++
			}
		}
		return n
	}
	wait.For(t, "half the partitions' fetches to be refused", func() bool { return refused() >= parts/2 }, func() string {
		return fmt.Sprintf("%d of %d partitions refused", refused(), parts)
	})
	if n := logs.Count("level=WARN", "consumer group error", "partition="); n != 1 {
		t.Fatalf("%d partitions refused READ logged %d WARN lines for their fetch errors, want 1:\n%s", refused(), n, all())
	}
}
