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
	log := slog.New(logs)
	m := &member{
		opts:  &Options{},
		log:   log,
		reach: &kafkareach.Reach{},
		cm:    claim.NewMember("g", "stage", log, false),
	}
	p := &partition{m: m}
	p.Claim = claim.New(claim.Config{Topic: "events", Partition: 0, Log: log, Start: 5})
	errs := make(chan *sarama.ConsumerError, 2)
	r := &reader{p: p, log: log, ownErrors: errs}
	failed := func() *sarama.ConsumerError {
		return &sarama.ConsumerError{Topic: "events", Partition: 0, Err: sarama.ErrRequestTimedOut}
	}

	// A fetch failed and the reader took its error: the run begins.
	if !r.ownFailed(failed()) {
		t.Fatal("a passing fetch error failed the member")
	}
	// The next fetch failed too, and the one after it fetched records;
	// the reader takes the records first.
	errs <- failed()
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
