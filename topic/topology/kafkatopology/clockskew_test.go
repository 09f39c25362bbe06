package kafkatopology

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// writeHoldRecord writes the record of letter {N: n} to partition 0 of
// q's hold topic i as a hold due at due writes it.
func writeHoldRecord(t *testing.T, b *Backend[msg], q topology.Queues[msg], i, n int, due time.Time) {
	t.Helper()
	qs := q.(*queues[msg])
	err := b.send(&sarama.ProducerMessage{Topic: qs.holds[i].name, Partition: 0,
		Value: sarama.StringEncoder(`{"N":` + strconv.Itoa(n) + `}`), Headers: qs.holdHeaders(due)})
	if err != nil {
		t.Fatal(err)
	}
}

// holdWithLogs declares a topology with one hold of delay on a backend
// of its own logging to logs, and subscribes a reader of it.
func holdWithLogs(t *testing.T, delay time.Duration) (*Backend[msg], topology.Queues[msg], topology.Reader[msg], *lockedBuffer) {
	t.Helper()
	c := testbroker.Kafka(t)
	logs := &lockedBuffer{}
	b := newLoggedBackend(t, c.ListenAddrs(), logs)
	q := declare(t, b, topology.New("skewed").Hold(delay))
	return b, q, subscribe(t, q), logs
}

// receiveNs receives n letters and returns their values' N, in the order
// received.
func receiveNs(t *testing.T, r topology.Reader[msg], n int) []int {
	t.Helper()
	var got []int
	for range n {
		got = append(got, receiveOne(t, r).Value.N)
	}
	return got
}

// Guarantee: a hold record due further ahead than its hold's delay (the
// producing process's clock an hour ahead of the releaser's) is released
// the hold's delay after the releaser read it, not when its due time comes
// on the releaser's clock, so neither it nor the letter behind it on its
// partition waits the hour; the releaser logs it on one WARN line naming
// its offset and due time.
func TestAHoldRecordDueFarAheadIsReleasedAfterTheHoldsDelay(t *testing.T) {
	b, q, r, logs := holdWithLogs(t, time.Second)

	ahead := time.Now().Add(time.Hour)
	writeHoldRecord(t, b, q, 0, 1, ahead)
	writeHoldRecord(t, b, q, 0, 2, time.Now().Add(time.Second))
	got := receiveNs(t, r, 2)
	if got[0]+got[1] != 3 {
		t.Fatalf("received letters %v, want 1 and 2", got)
	}
	out := logs.String()
	if n := strings.Count(out, aheadLog); n != 1 {
		t.Fatalf("%d lines %q, want 1 (for the record at offset 0); logs:\n%s", n, aheadLog, out)
	}
	if !strings.Contains(out, "offset=0 due="+ahead.UTC().Format("2006-01-02T15:04:05")) {
		t.Errorf("the line does not name offset 0 and its due time %s; logs:\n%s", ahead.UTC(), out)
	}
}

// Guarantee: a hold record due in the past on the releaser's clock (the
// producing process's clock an hour behind it) is released at once, not
// held its hold's delay again, and logs nothing.
func TestAHoldRecordDueInThePastIsReleasedAtOnce(t *testing.T) {
	b, q, r, logs := holdWithLogs(t, time.Hour)

	writeHoldRecord(t, b, q, 0, 1, time.Now().Add(-time.Hour))
	if got := receiveNs(t, r, 1); got[0] != 1 {
		t.Fatalf("received letter %v, want 1", got)
	}
	if out := logs.String(); strings.Contains(out, aheadLog) {
		t.Errorf("logged %q for a record due in the past; logs:\n%s", aheadLog, out)
	}
}
