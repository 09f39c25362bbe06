package kafkareach

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/IBM/sarama"
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
	r := Reach{Health: &st}
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
	r := Reach{Health: &reports{}}
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
	synctest.Test(t, func(t *testing.T) {
		var st reports
		r := Reach{Health: &st}
		r.SessionStarted()
		r.Heard() // an answer before any degrade
		r.Unreachable(errors.New("out of brokers"))
		time.Sleep(HeardQuiet)
		r.Heard()
		r.Heard()
		r.SessionEnded()
		r.SessionFailed(errors.New("refused"))
		r.SessionFailed(errors.New("refused again"))
		time.Sleep(HeardQuiet)
		r.Heard() // the refusal's answer: no session
		r.SessionStarted()
		r.Heard()
		want := []string{"degrade: out of brokers", "recovered", "degrade: refused again", "recovered"}
		if !slices.Equal(st.got, want) {
			t.Fatalf("reports %q, want %q", st.got, want)
		}
	})
}

// Guarantee: a cluster that answers between two failures a few seconds
// apart (heartbeats answered, a partition's leader lookup failing at each
// retry) keeps the stage degraded, reported once, instead of flapping:
// an answer ends the degrade only HeardQuiet after the last failure.
func TestReachAnswersBetweenRepeatedFailuresDoNotFlap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var st reports
		r := Reach{Health: &st}
		r.SessionStarted()
		for range 5 {
			r.Unreachable(errors.New("out of brokers"))
			for range 4 {
				time.Sleep(500 * time.Millisecond) // fetches answered meanwhile
				r.Heard()
			}
		}
		if slices.Contains(st.got, "recovered") {
			t.Fatalf("reports %q: recovered between failures 2 s apart", st.got)
		}
		time.Sleep(HeardQuiet)
		r.Heard()
		if got := st.got[len(st.got)-1]; got != "recovered" {
			t.Fatalf("reports %q, want recovered once the failures stopped for %v", st.got, HeardQuiet)
		}
	})
}

// Guarantee: noting an answer from the cluster costs no allocation (it is
// called for each response the client reads).
func TestReachHeardAllocatesNothing(t *testing.T) {
	r := Reach{Health: &reports{}}
	r.SessionStarted()
	if n := testing.AllocsPerRun(100, r.Heard); n != 0 {
		t.Fatalf("Heard allocates %v, want 0", n)
	}
}

// Guarantee: of a sarama client's own errors only one saying that it
// could reach no broker degrades the stage; a failed session saying so
// degrades it at once, any other only as the second in a row.
func TestReachSaramaErrorsDegradeOnNoBrokerOrTheSecondFailedSession(t *testing.T) {
	var st reports
	r := Reach{Health: &st}
	r.SaramaError(errors.New("connection reset"))
	r.SaramaError(errors.New("connection reset again"))
	if len(st.got) != 0 {
		t.Fatalf("reports %q after errors the client retries, want none", st.got)
	}
	r.SaramaError(fmt.Errorf("fetch: %w", sarama.ErrOutOfBrokers))
	r.Reading()
	r.SaramaSessionFailed(fmt.Errorf("join: %w", sarama.ErrOutOfBrokers))
	r.Reading()
	r.SaramaSessionFailed(errors.New("rebalance in progress"))
	r.SaramaSessionFailed(errors.New("rebalance in progress again"))
	want := []string{
		"degrade: fetch: " + sarama.ErrOutOfBrokers.Error(), "recovered",
		"degrade: join: " + sarama.ErrOutOfBrokers.Error(), "recovered",
		"degrade: rebalance in progress again",
	}
	if !slices.Equal(st.got, want) {
		t.Fatalf("reports %q, want %q", st.got, want)
	}
}

// inSession runs test in a synctest bubble with a Reach reporting to st
// whose member holds its session.
func inSession(t *testing.T, test func(t *testing.T, r *Reach, st *reports)) {
	synctest.Test(t, func(t *testing.T) {
		var st reports
		r := Reach{Health: &st}
		r.SessionStarted()
		test(t, &r, &st)
	})
}

// want fails t unless the reports so far are want, when saying at what
// point.
func (r *reports) want(t *testing.T, when string, want ...string) {
	t.Helper()
	if !slices.Equal(r.got, want) {
		t.Fatalf("reports %q %s, want %q", r.got, when, want)
	}
}

// Guarantee: a failed session is a sign that the member cannot read as
// much as an unreachable cluster: while the member holds its session, an
// answer read within HeardQuiet of the failure that degraded the stage
// leaves it degraded; one read HeardQuiet after it ends the degrade.
func TestReachAnAnswerSoonAfterAFailedSessionEndsNoDegrade(t *testing.T) {
	inSession(t, func(t *testing.T, r *Reach, st *reports) {
		r.SessionFailed(errors.New("heartbeat failed"))
		r.SessionFailed(errors.New("heartbeat failed again"))
		time.Sleep(HeardQuiet - time.Millisecond)
		r.Heard()
		st.want(t, "after an answer just within HeardQuiet of the failed session", "degrade: heartbeat failed again")
		time.Sleep(time.Millisecond)
		r.Heard()
		st.want(t, "after an answer HeardQuiet after the failed session", "degrade: heartbeat failed again", "recovered")
	})
}

// Guarantee: a member whose session ended hears answers that end nothing,
// however long after the failures; the next session starting ends the
// degrade at once, before any answer.
func TestReachWithoutASessionOnlyTheNextSessionEndsTheDegrade(t *testing.T) {
	inSession(t, func(t *testing.T, r *Reach, st *reports) {
		r.SessionEnded()
		r.SessionFailed(errors.New("refused"))
		r.SessionFailed(errors.New("refused again"))
		time.Sleep(2 * HeardQuiet)
		r.Heard()
		st.want(t, "after an answer with no session", "degrade: refused again")
		r.SessionStarted()
		st.want(t, "once a session started", "degrade: refused again", "recovered")
	})
}

// Guarantee: an answer from the cluster, unlike a session starting or
// records, does not start the count of failed sessions again: two failed
// sessions in a row degrade the stage even when the cluster answered in
// between (a refused join is itself an answer).
func TestReachAnAnswerBetweenTwoFailedSessionsStillDegrades(t *testing.T) {
	inSession(t, func(t *testing.T, r *Reach, st *reports) {
		r.SessionFailed(errors.New("first"))
		time.Sleep(HeardQuiet)
		r.Heard()
		r.SessionFailed(errors.New("second"))
		st.want(t, "after two failed sessions with an answer between", "degrade: second")
	})
}

// Guarantee: the zero Reach reports to no stage: it degrades and
// recovers without a Health to tell.
func TestReachWithoutHealthReportsNothing(t *testing.T) {
	var r Reach
	r.Unreachable(errors.New("out of brokers"))
	r.SessionFailed(errors.New("refused"))
	r.Reading()
}

// Guarantee: a sarama client's error saying that an ACL refuses the
// reader its topic or its group degrades the stage at once, the refusal
// as the reason; while the client goes on retrying the refused fetch, an
// answer read within HeardQuiet of the last refusal leaves it degraded,
// and one read HeardQuiet after it (READ granted back) ends the degrade.
func TestReachSaramaAuthorizationRefusalsDegradeAtOnceUntilTheyStop(t *testing.T) {
	inSession(t, func(t *testing.T, r *Reach, st *reports) {
		denied := &sarama.ConsumerError{Topic: "events", Partition: 0, Err: sarama.ErrTopicAuthorizationFailed}
		r.SaramaError(denied)
		st.want(t, "after a refused fetch", "degrade: "+denied.Error())
		for range 3 {
			time.Sleep(HeardQuiet - time.Millisecond)
			r.Heard() // the refusal's own answer, and heartbeats
			r.SaramaError(denied)
		}
		st.want(t, "while the refusals go on", "degrade: "+denied.Error(), "degrade: "+denied.Error(),
			"degrade: "+denied.Error(), "degrade: "+denied.Error())
		time.Sleep(HeardQuiet)
		r.Heard()
		r.SaramaError(fmt.Errorf("heartbeat: %w", sarama.ErrGroupAuthorizationFailed))
		r.Reading()
		st.want(t, "after the refusals stopped, then a group refusal and records",
			"degrade: "+denied.Error(), "degrade: "+denied.Error(), "degrade: "+denied.Error(), "degrade: "+denied.Error(),
			"recovered", "degrade: heartbeat: "+sarama.ErrGroupAuthorizationFailed.Error(), "recovered")
	})
}
