package kafkatopology

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: while the cluster cannot be reached, a reader's consumer
// group logs its partitions' fetch errors failing alike on one WARN line,
// not one per partition nor per retry, and its failed sessions on one;
// once the cluster answers again, a session starts and each of those ends
// with one INFO line counting its failures, those of the fetch errors
// counting their partitions too.
func TestAnUnreachableClusterIsLoggedOncePerFailureNotPerPartitionOrRetry(t *testing.T) {
	c := testbroker.Kafka(t)
	logs := &logtest.Lines{}
	b, err := New(Options[msg]{Brokers: c.ListenAddrs(), Config: testbroker.SaramaConfig(), Codec: topic.JSONCodec[msg]{},
		Partitions: 3, AdminTimeout: patience, RevokeTimeout: 2 * time.Second, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { topologytest.MustClose(t, "the backend", b.Close) })
	q := declare(t, b, topology.New("orders"))
	r := subscribe(t, q)
	publish := func(n int) {
		t.Helper()
		if err := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: n}}); err != nil {
			t.Fatal(err)
		}
	}
	for n := range 3 {
		publish(n)
	}
	for range 3 {
		l := receiveOne(t, r)
		if err := r.Settle(t.Context(), &l); err != nil {
			t.Fatal(err)
		}
	}

	all := func() string { return strings.Join(logs.All(), "") }
	testbroker.OutOfReach(t, c, "the reader's sessions to fail", func() bool {
		return logs.Count("consumer group session failed") > 0
	}, all)
	// A letter published once the cluster answers again comes from a
	// session that started after the outage: its start was logged.
	publish(3)
	l := receiveOne(t, r)
	if err := r.Settle(t.Context(), &l); err != nil {
		t.Fatal(err)
	}
	fetchLines := logs.Count("level=WARN", "consumer group error", "partition=")
	parts, ended := logs.Sum("partitions_count", "level=INFO", "consumer group error ended", "partition=")
	if fetchLines == 0 || fetchLines == 3 || ended != fetchLines || parts != 3 {
		t.Errorf("%d WARN lines for the partitions' fetch errors, %d INFO lines ending them counting %d partitions; want fewer than a line per partition, and as many INFO lines, counting the 3 partitions:\n%s",
			fetchLines, ended, parts, all())
	}
	logs.Want(t, 1, "WARN lines for the failed sessions", "level=WARN", "consumer group session failed")
	logs.Want(t, 1, "INFO lines ending the failed sessions", "level=INFO", "consumer group session started again", "failures=")
	if rep := logs.Repeated(); len(rep) > 0 {
		t.Errorf("lines logged more than once: %q", rep)
	}
}
