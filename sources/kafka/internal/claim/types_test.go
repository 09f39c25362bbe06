package claim

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"
)

// Guarantee: a CommitError in JSON carries its error's message (a
// wrapped error, which encodes as an empty object, and one whose value
// JSON cannot encode included), and decodes back with that message, the
// time and the partitions; a CommitError without an error decodes with a
// nil Err.
func TestCommitErrorJSONCarriesTheErrorsMessage(t *testing.T) {
	at := time.Date(2026, 12, 3, 22, 0, 0, 0, time.UTC)
	for _, err := range []error{
		fmt.Errorf("committing: %w", errors.New("the coordinator is loading")),
		unencodable{func() {}},
		nil,
	} {
		in := MemberStats{Stage: "s", LastCommitError: &CommitError{Err: err, At: at, Partitions: []string{"t/0"}}}
		b, jerr := json.Marshal(in)
		if jerr != nil {
			t.Fatalf("encoding a commit error of %v: %v", err, jerr)
		}
		var out MemberStats
		if jerr := json.Unmarshal(b, &out); jerr != nil {
			t.Fatalf("decoding %s: %v", b, jerr)
		}
		ce := out.LastCommitError
		if ce == nil || !ce.At.Equal(at) || len(ce.Partitions) != 1 || ce.Partitions[0] != "t/0" {
			t.Fatalf("%s decodes as %+v, want the time and partitions encoded", b, ce)
		}
		switch {
		case err == nil && ce.Err != nil:
			t.Errorf("%s decodes with the error %q, want nil", b, ce.Err)
		case err != nil && (ce.Err == nil || ce.Err.Error() != err.Error()):
			t.Errorf("%s decodes with the error %v, want %q", b, ce.Err, err)
		}
	}
	var none MemberStats
	b, _ := json.Marshal(none)
	if err := json.Unmarshal(b, &none); err != nil || none.LastCommitError != nil {
		t.Errorf("%s decodes as %+v (%v), want no commit error", b, none.LastCommitError, err)
	}
}

// unencodable is an error whose value encoding/json cannot encode.
type unencodable struct{ Retry func() }

func (unencodable) Error() string { return "retry later" }
