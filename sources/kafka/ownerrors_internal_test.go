package kafka

import (
	"log/slog"
	"testing"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/kafkareach"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/sources/kafka/internal/claim"
)

// Guarantee: a failed fetch of a rewound partition that sarama queued
// before records it then fetched is counted before those records: the
// records end the run of failed fetches it belongs to, and the partition,
// reading again, is left in no run. The reader's select takes either of
// the two channels first; with the error taken after the records, the
// error would begin a second run (a second WARN line) that only the next
// record would end.
func TestAFetchErrorQueuedBeforeRecordsEndsWithThem(t *testing.T) {
	logs := &logtest.Records{}
	_, r := claimReader(logs)
	p := r.p
	errs := make(chan *sarama.ConsumerError, 2)
	r.ownErrors = errs

	// A fetch failed and the reader took its error: the run begins.
	if !r.ownFailed(timedOut()) {
		t.Fatal("a passing fetch error failed the member")
	}
	// The next fetch failed too, and the one after it fetched records;
	// the reader takes the records first.
	errs <- timedOut()
	if !r.readsAgain(&sarama.ConsumerMessage{Topic: "events", Partition: 0, Offset: 5}) {
		t.Fatal("the records failed the member")
	}
	// The reader then takes whatever is still queued.
	for len(errs) > 0 {
		r.ownFailed(<-errs)
	}

	if n := logs.Count(slog.LevelWarn, claim.FetchFailedLog); n != 1 {
		t.Errorf("%d WARN lines for one run of failed fetches, want 1", n)
	}
	if n := logs.Count(slog.LevelInfo, claim.FetchFailedLog+claim.FetchEndedSuffix); n != 1 {
		t.Errorf("%d INFO lines ending the run once the partition read again, want 1", n)
	}
	if next := p.Next.Load(); next != 6 {
		t.Errorf("Next = %d after record 5, want 6", next)
	}
}

// claimReader is a member logging to logs and the reader of its claim of
// partition 0 of "events" from offset 5. With the group's own claim, the
// claim's records come to the reader and its fetch errors to the
// member's handleError, sarama forwarding them from the claim's consumer
// to the group's error channel on a goroutine of its own; a rewound
// partition's come to the reader both (its ownErrors).
func claimReader(logs *logtest.Records) (*member, *reader) {
	log := slog.New(logs)
	m := &member{
		src:   &Source{},
		opts:  &Options{},
		log:   log,
		reach: &kafkareach.Reach{},
		cm:    claim.NewMember("g", "stage", log, false),
	}
	p := &partition{m: m}
	p.Claim = claim.New(claim.Config{Topic: "events", Partition: 0, Log: log, Start: 5})
	return m, &reader{p: p, log: log}
}

// timedOut is a failed fetch of partition 0 of "events", as a consumer's
// error channel carries it.
func timedOut() *sarama.ConsumerError {
	return &sarama.ConsumerError{Topic: "events", Partition: 0, Err: sarama.ErrRequestTimedOut}
}

// Guarantee: with the sarama source, a failed fetch that the group
// reports only after the records of a later fetch were delivered (sarama
// forwards a claim's errors to the group's channel on a goroutine of its
// own, which nothing orders with the claim's records) begins at most a
// run of failed fetches that the partition's next records end: once the
// partition delivers again, every run logged has its end line and none
// is left for the member's close to end.
func TestALateFetchErrorIsInARunTheNextRecordsEnd(t *testing.T) {
	logs := &logtest.Records{}
	m, r := claimReader(logs)
	ended := claim.FetchFailedLog + claim.FetchEndedSuffix

	m.handleError(timedOut())
	if !r.readsAgain(&sarama.ConsumerMessage{Topic: "events", Partition: 0, Offset: 5}) {
		t.Fatal("record 5 failed the member")
	}
	// The error of a fetch made before record 5's, forwarded late.
	m.handleError(timedOut())
	if !r.readsAgain(&sarama.ConsumerMessage{Topic: "events", Partition: 0, Offset: 6}) {
		t.Fatal("record 6 failed the member")
	}

	warns, ends := logs.Count(slog.LevelWarn, claim.FetchFailedLog), logs.Count(slog.LevelInfo, ended)
	if warns == 0 || ends != warns {
		t.Fatalf("%d WARN lines and %d end lines once the partition delivered again, want every run ended", warns, ends)
	}
	m.cm.FlushLogs()
	if n := logs.Count(slog.LevelInfo, ended); n != ends {
		t.Errorf("the member's close ended %d runs of a partition that delivered again, want none", n-ends)
	}
}
