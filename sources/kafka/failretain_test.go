package kafka_test

import (
	"errors"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// Guarantee: a failed record's value is kept by neither source once its
// outcome is settled, whatever the failure does: committed past under
// FailureCommit, redelivered under FailureRedeliver or DispositionRetry
// (each attempt's value), or discarded. As in
// TestARunningKafkaSourceKeepsNoHandledValue, one more record a partition
// is handled and committed before the check, so that no client still holds
// the last batch it fetched.
func TestAFailedRecordsValueIsNotKeptOnceItsOutcomeIsSettled(t *testing.T) {
	cases := []struct {
		name   string
		policy kafka.FailurePolicy
		disp   acker.Disposition
	}{
		{"committed past", kafka.FailureCommit, acker.DispositionDefault},
		{"redelivered by the policy", kafka.FailureRedeliver, acker.DispositionDefault},
		{"retried", kafka.FailureCommit, acker.DispositionRetry},
		{"discarded", kafka.FailureRedeliver, acker.DispositionDiscard},
	}
	eachClient(t, func(t *testing.T, cl client) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				const parts, n = 2, 100
				group := "g-fail-retain"
				c := newCluster(t, parts)
				ends := produce(t, c, parts, 0, n)
				o := sourceOptions(c, group)
				o.FailurePolicy = tc.policy
				var (
					mu     sync.Mutex
					ws     []weak.Pointer[byte]
					failed = map[rec]bool{}
					first  = true
				)
				po := pipelineOpts("fail-retain", cl.new(t, o), 1, newLedger(), func(m *message.Message[[]byte]) error {
					md, _ := message.MetadataAs[*kafka.Metadata](m)
					mu.Lock()
					defer mu.Unlock()
					if !first {
						return nil
					}
					ws = append(ws, weak.Make(&m.Data[0]))
					if r := (rec{md.Partition, md.Offset}); md.Offset%5 == 0 && !failed[r] {
						failed[r] = true
						return errors.New("fails once")
					}
					return nil
				})
				po.Processors.HandleFailed = disposeAll(tc.disp)
				p := startPipeline(t, po)
				defer stopPipeline(t, p)
				settled := func() bool { return equalOffsets(committed(c, group), ends) }
				wait.Within(t, 30*time.Second, "every record settled and committed", settled)
				mu.Lock()
				first = false
				if len(failed) != n/5 {
					t.Fatalf("%d records failed, want %d", len(failed), n/5)
				}
				mu.Unlock()
				nextRecordSettled(t, c, parts, n, ends, 30*time.Second, settled)
				mu.Lock()
				defer mu.Unlock()
				if live := wait.Reachable(ws); live > 0 {
					t.Errorf("%d of %d values (%d records failed once) still reachable from the running source after their outcomes were settled and committed", live, len(ws), len(failed))
				}
			})
		}
	})
}
