package observe_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// retryError is an error whose value encoding/json cannot encode (a func
// field).
type retryError struct{ Retry func() }

func (retryError) Error() string { return "the broker asks to retry later" }

// Guarantee: /stats says why a Kafka member's latest commit failed: its
// LastCommitError carries the error's message (not the empty object a
// wrapped error encodes as), the body decodes into an observe.Snapshot
// whose LastCommitError has that message, when and which partitions, and
// an error whose value JSON cannot encode does not empty the body.
func TestStatsSaysWhyAKafkaCommitFailed(t *testing.T) {
	at := time.Date(2026, 12, 3, 22, 0, 0, 0, time.UTC)
	cause := fmt.Errorf("kafka: committing the offsets of group billing: %w", errors.New("the coordinator is loading"))
	st := kafka.Stats{GroupID: "billing", Members: []kafka.MemberStats{{
		Stage:           "billing.producer.0",
		CommitErrors:    1,
		LastCommitError: &kafka.CommitError{Err: cause, At: at, Partitions: []string{"orders/0", "orders/1"}},
	}, {
		Stage:           "billing.producer.1",
		CommitErrors:    1,
		LastCommitError: &kafka.CommitError{Err: retryError{func() {}}, At: at, Partitions: []string{"orders/2"}},
	}}}
	obs := observe.New(observe.Options{})
	if err := obs.AddKafka(t.Context(), newFaulty(st)); err != nil {
		t.Fatal(err)
	}
	code, body, _ := record(obs.Handler(nil), "/stats")
	if code != http.StatusOK || !strings.Contains(body, "the coordinator is loading") || !strings.Contains(body, "retry later") {
		t.Fatalf("/stats answered %d without the commit error's message:\n%s", code, body)
	}
	snap := decodeSnapshot(t, body)
	if len(snap.Kafka) != 1 || len(snap.Kafka[0].Members) != 2 {
		t.Fatalf("/stats lists the Kafka sources %+v, want the one added", snap.Kafka)
	}
	ce := snap.Kafka[0].Members[0].LastCommitError
	if ce == nil || ce.Err == nil || ce.Err.Error() != cause.Error() || !ce.At.Equal(at) || len(ce.Partitions) != 2 {
		t.Errorf("/stats decodes the last commit error as %+v, want %q at %v on 2 partitions", ce, cause, at)
	}
}

// Guarantee: a snapshot /stats cannot encode as JSON (a Pipeline of the
// caller's whose rate limit has a zero interval: an infinite rate) is
// answered 500 with the encoding error, logged once as a warning, not
// 200 with an empty body.
func TestStatsThatCannotBeEncodedAnswers500WithTheError(t *testing.T) {
	var logs bytes.Buffer                                                                  // written by the handler, on the test's goroutine
	obs := observe.New(observe.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}) // Info and above
	add(t, obs, newFaulty(pipeline.Stats{Name: "odd", Started: time.Now(), RateLimit: &producer.RateLimit{Allowed: 1}}))
	code, body, _ := record(obs.Handler(nil), "/stats")
	if code != http.StatusInternalServerError || !strings.Contains(body, "unsupported value") {
		t.Errorf("/stats of a snapshot JSON cannot encode answered %d %q, want 500 with the encoding error", code, body)
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 || !strings.Contains(logs.String(), "unsupported value") {
		t.Errorf("%d warnings logged, want 1 with the encoding error; logs:\n%s", n, logs.String())
	}
}
