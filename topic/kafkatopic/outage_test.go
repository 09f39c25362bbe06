package kafkatopic_test

import (
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: while the cluster cannot be reached, a balanced member and a
// broadcast subscriber each log their partitions' fetch errors failing
// alike on one WARN line, not one per partition, and the member its
// failed sessions on one, not one line per retry; once the cluster
// answers again, each of those ends with one INFO line counting its
// failures (the member's when its session starts, counting the
// partitions of its fetch errors too, the broadcast subscriber's when the
// last of its partitions delivers a record, counting them).
func TestAnUnreachableClusterIsLoggedOncePerFailureNotPerRetry(t *testing.T) {
	c := testbroker.Kafka(t)
	logs := &logtest.Lines{}
	o := testOptions[string](c, topic.StringCodec{})
	o.Partitions = 3
	o.Key = func(v string) []byte { return []byte(v) }
	o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	b := newBackend(t, o)
	h := newTopic(t, b, "outage", topic.Options{Mode: topic.Mixed})
	m := subscribe(t, h, topic.Balanced("g"))
	bs := subscribe(t, h, topic.Broadcast())
	if err := h.Publish(ctxT(t), "before"); err != nil {
		t.Fatal(err)
	}
	recv(t, bs)
	if err := m.Ack(recv(t, m).ID); err != nil {
		t.Fatal(err)
	}

	all := func() string { return strings.Join(logs.All(), "") }
	testbroker.OutOfReach(t, c, "the member's sessions to fail", func() bool {
		return logs.Count("consumer group session failed") > 0
	}, all)
	// Records on every partition: the broadcast subscriber's partitions
	// deliver again; the member's come from a session that started after
	// the outage, whose start was logged.
	const n = 30
	for i := range n {
		if err := h.Publish(ctxT(t), "after"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		recv(t, bs)
		if err := m.Ack(recv(t, m).ID); err != nil {
			t.Fatal(err)
		}
	}

	bLines := logs.Count("level=WARN", "kafkatopic: broadcast consumer error", "partition=")
	bParts, bEnded := logs.Sum("partitions_count", "level=INFO", "kafkatopic: broadcast consumer error ended", "partition=", "failures=")
	if bLines == 0 || bLines == 3 || bEnded != bLines || bParts != 3 {
		t.Errorf("%d WARN lines for the broadcast subscriber's fetch errors, %d INFO lines ending them counting %d partitions; want fewer than a line per partition, and as many INFO lines, counting the 3 partitions:\n%s",
			bLines, bEnded, bParts, all())
	}
	fetchLines := logs.Count("level=WARN", "kafkatopic: consumer group error", "partition=")
	parts, ended := logs.Sum("partitions_count", "level=INFO", "kafkatopic: consumer group error ended", "partition=")
	if fetchLines == 0 || fetchLines == 3 || ended != fetchLines || parts != 3 {
		t.Errorf("%d WARN lines for the member's fetch errors, %d INFO lines ending them counting %d partitions; want fewer than a line per partition, and as many INFO lines, counting the 3 partitions:\n%s",
			fetchLines, ended, parts, all())
	}
	logs.Want(t, 1, "WARN lines for the failed sessions", "level=WARN", "kafkatopic: consumer group session failed")
	logs.Want(t, 1, "INFO lines ending the failed sessions", "level=INFO", "kafkatopic: consumer group session started again", "failures=")
	if rep := logs.Repeated(); len(rep) > 0 {
		t.Errorf("lines logged more than once: %q", rep)
	}
}
