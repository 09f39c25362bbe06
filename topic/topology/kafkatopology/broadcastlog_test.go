package kafkatopology

import (
	"fmt"
	"strings"
	"testing"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: a broadcast reader of a topic of many partitions that cannot
// read it, the cluster out of reach or READ on the topic denied, reports
// itself unable to read and logs its partitions' fetch errors failing
// alike on one WARN line per cause naming the topic and the cause, not
// one per partition (READ denied: exactly one); once it reads again, it
// reports so, each such line is ended by one INFO line when the last of
// its partitions delivers a record, the INFO lines counting every
// partition once, and every letter published is delivered.
func TestABroadcastReaderThatCannotReadLogsItsPartitionsFetchErrorsOnAFewLinesNamingTheTopic(t *testing.T) {
	const parts = 32
	const warnMsg = `msg="kafkatopology: broadcast consumer error"`
	for _, tc := range []struct {
		name  string
		cause string // in the WARN lines
		most  int    // WARN lines
	}{
		{"out of reach", "error=", parts / 16},
		{"READ denied", "not authorized", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &logtest.Lines{}
			var b *Backend[msg]
			var outage func(kname string, failing func() bool, state func() string)
			switch tc.name {
			case "out of reach":
				c := testbroker.Kafka(t)
				b = newLoggedBackend(t, c.ListenAddrs(), logs, func(o *Options[msg]) { o.Partitions = parts })
				outage = func(_ string, failing func() bool, state func() string) {
					testbroker.OutOfReach(t, c, "the reader to report it cannot read and log its fetch errors", failing, state)
				}
			default:
				k := testbroker.KafkaWithACLs(t)
				b = newLoggedBackend(t, k.ListenAddrs(), logs, func(o *Options[msg]) { o.Config, o.Partitions = k.Config(), parts })
				outage = func(kname string, failing func() bool, state func() string) {
					k.Deny(t, kname, sarama.AclOperationRead)
					wait.For(t, "the reader to report it cannot read and log its fetch errors", failing, state)
					k.Grant(t, kname, sarama.AclOperationRead)
				}
			}
			q := declare(t, b, topology.New("broadcast-log").Broadcast())
			kname := q.(*queues[msg]).main
			r := subscribe(t, q)
			obs := &reachLog{}
			r.(topology.ReachReporter).ReportReach(obs)
			all := func() string { return strings.Join(logs.All(), "") }
			state := func() string {
				last, _ := obs.last()
				return fmt.Sprintf("last report %v; log:\n%s", last, all())
			}

			outage(kname, func() bool {
				err, any := obs.last()
				return any && err != nil && logs.Count("level=WARN", warnMsg) > 0
			}, state)
			// One letter to each partition (they take turns).
			for n := range parts {
				if err := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: n}}); err != nil {
					t.Fatal(err)
				}
			}
			seen := map[int]bool{}
			for range parts {
				l := receiveOne(t, r)
				seen[l.Value.N] = true
			}
			if len(seen) != parts {
				t.Fatalf("received letters %v, want the %d published", seen, parts)
			}
			wait.For(t, "the reader to report it reads again", func() bool {
				err, any := obs.last()
				return any && err == nil
			}, state)

			warns := logs.Count("level=WARN", warnMsg)
			named := logs.Count("level=WARN", warnMsg, "topic="+kname, tc.cause)
			counted, ended := logs.Sum("partitions_count", "level=INFO", "kafkatopology: broadcast consumer error ended", "topic="+kname)
			if warns == 0 || warns > tc.most || named != warns || ended != warns || counted != parts {
				t.Errorf("%d partitions that cannot be read logged %d WARN lines for their fetch errors (%d naming topic %s and %q), %d INFO lines ending them counting %d partitions; want 1 to %d, each naming the topic and the cause, as many INFO lines, counting the %d partitions:\n%s",
					parts, warns, named, kname, tc.cause, ended, counted, tc.most, parts, all())
			}
		})
	}
}
