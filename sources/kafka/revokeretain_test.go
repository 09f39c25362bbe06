package kafka_test

import (
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
)

// Guarantee: once a partition revoked from a member is released (what had
// left the stage buffer handled and committed, the rest withdrawn and its
// read-ahead dropped, all of it handled by the new owners), the old member
// keeps no value of it: neither of the records it handled nor, since a
// fetched batch's values share its buffer, of those it withdrew or had
// read ahead. As in TestARunningKafkaSourceKeepsNoHandledValue, one more
// record a partition is handled and committed before the check.
func TestARevokedPartitionsValuesAreNotKeptOnceItIsReleased(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const parts, n = 2, 400
		group := "g-revoke-retain"
		c := newCluster(t, parts)
		ends := produce(t, c, parts, 0, n)
		l := newLedger()
		opts := sourceOptions(c, group)
		opts.RevokeTimeout = 3 * time.Second
		var (
			mu    sync.Mutex
			ws    []weak.Pointer[byte]
			watch = true
		)
		release := make(chan struct{})
		unblock := sync.OnceFunc(func() { close(release) })
		defer unblock()
		stuck := make(chan struct{})
		var stuckOnce sync.Once
		poA := pipelineOpts("a", cl.new(t, opts), 1, l, func(m *message.Message[[]byte]) error {
			mu.Lock()
			if watch {
				ws = append(ws, weak.Make(&m.Data[0]))
			}
			mu.Unlock()
			stuckOnce.Do(func() { close(stuck) })
			<-release
			return nil
		})
		poA.Producer.Flow = producer.Flow{Initial: 100}
		poA.Processors.Concurrency = 1
		a := startPipeline(t, poA)
		defer stopPipeline(t, a)
		<-stuck
		b := startPipeline(t, pipelineOpts("b", cl.new(t, opts), 1, l, nil))
		defer stopPipeline(t, b)
		waitBothAssigned(t, c, group)
		unblock()
		settled := func() bool { return l.covers(ends) && equalOffsets(committed(c, group), ends) }
		wait.Within(t, 30*time.Second, "every record handled and committed", settled)
		mu.Lock()
		watch = false
		mu.Unlock()
		nextRecordSettled(t, c, parts, n, ends, 30*time.Second, settled)
		mu.Lock()
		defer mu.Unlock()
		if live := wait.Reachable(ws); live > 0 {
			t.Errorf("%d of %d values handled by the member its partition was revoked from still reachable once the partition was released and everything committed", live, len(ws))
		}
	})
}
