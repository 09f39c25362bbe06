package claim

import (
	"errors"
	"slices"
	"testing"
)

type reports struct{ got []string }

func (r *reports) Degrade(err error) { r.got = append(r.got, "degrade: "+err.Error()) }
func (r *reports) Recovered()        { r.got = append(r.got, "recovered") }

// Guarantee: one failed session does not degrade the stage, the second in
// a row does, a session or records in between start the count again, a
// client that reached no broker degrades it at once, and reading again
// recovers it, once.
func TestReachDegradesOnTheSecondFailedSessionOrNoBrokerAndRecoversOnReading(t *testing.T) {
	var st reports
	r := Reach{Stage: &st}
	r.SessionFailed(errors.New("first"))
	r.Reading()
	r.SessionFailed(errors.New("again first"))
	if len(st.got) != 0 {
		t.Fatalf("reports %q after single failures, want none", st.got)
	}
	r.SessionFailed(errors.New("second"))
	r.Reading()
	r.Reading()
	r.Unreachable(errors.New("out of brokers"))
	r.Reading()
	want := []string{"degrade: second", "recovered", "degrade: out of brokers", "recovered"}
	if !slices.Equal(st.got, want) {
		t.Fatalf("reports %q, want %q", st.got, want)
	}
}

// Guarantee: noting that the member reads costs no allocation when there
// is nothing to clear (it is called for each batch of records).
func TestReachReadingAllocatesNothing(t *testing.T) {
	r := Reach{Stage: &reports{}}
	if n := testing.AllocsPerRun(100, r.Reading); n != 0 {
		t.Fatalf("Reading allocates %v, want 0", n)
	}
}

// Guarantee: an answer from the cluster ends a degrade reported before it
// while the member holds its session, once; an answer read before the
// degrade, or while the member has no session (its joins fail, the group
// may answer them and still refuse), leaves the stage degraded until a
// session starts.
func TestReachRecoversOnAnAnswerAfterTheDegradeOnlyWithinASession(t *testing.T) {
	var st reports
	r := Reach{Stage: &st}
	r.SessionStarted()
	r.Heard() // an answer before any degrade
	r.Unreachable(errors.New("out of brokers"))
	r.Heard()
	r.Heard()
	r.SessionEnded()
	r.SessionFailed(errors.New("refused"))
	r.SessionFailed(errors.New("refused again"))
	r.Heard() // the refusal's answer: no session
	r.SessionStarted()
	r.Heard()
	want := []string{"degrade: out of brokers", "recovered", "degrade: refused again", "recovered"}
	if !slices.Equal(st.got, want) {
		t.Fatalf("reports %q, want %q", st.got, want)
	}
}

// Guarantee: noting an answer from the cluster costs no allocation (it is
// called for each response the client reads).
func TestReachHeardAllocatesNothing(t *testing.T) {
	r := Reach{Stage: &reports{}}
	r.SessionStarted()
	if n := testing.AllocsPerRun(100, r.Heard); n != 0 {
		t.Fatalf("Heard allocates %v, want 0", n)
	}
}
