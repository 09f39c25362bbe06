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
