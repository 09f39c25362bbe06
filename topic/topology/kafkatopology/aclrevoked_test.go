package kafkatopology

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// aclBackend is a backend of k logging in as k's user.
func aclBackend(t *testing.T, k *testbroker.ACLKafka, logs *lockedBuffer) *Backend[msg] {
	t.Helper()
	return newLoggedBackend(t, k.ListenAddrs(), logs, func(o *Options[msg]) { o.Config = k.Config() })
}

// countProduces counts the Produce requests k receives for kname.
func countProduces(k *testbroker.ACLKafka, kname string) *atomic.Int64 {
	var n atomic.Int64
	to := testbroker.ProducesTo(kname)
	k.ControlKey(kmsg.Produce.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		if to(req) {
			n.Add(1)
		}
		return nil, nil, false
	})
	return &n
}

// rejected is the death of a letter of topology name its handler rejected.
func rejected(name string) *topology.Death {
	return &topology.Death{Reason: topology.ReasonRejected, Error: "rejected", Topic: name, Group: name}
}

// expectDenied fails t unless err wraps sarama.ErrTopicAuthorizationFailed
// and its text names topic kname and authorization, without k's
// credentials.
func expectDenied(t *testing.T, k *testbroker.ACLKafka, what string, err error, kname string) {
	t.Helper()
	if !errors.Is(err, sarama.ErrTopicAuthorizationFailed) {
		t.Fatalf("%s = %v, want an error wrapping sarama.ErrTopicAuthorizationFailed", what, err)
	}
	text := err.Error()
	if !strings.Contains(text, strconv.Quote(kname)) || !strings.Contains(text, "not authorized") {
		t.Fatalf("%s: %q, want it to name topic %q and say it is not authorized", what, text, kname)
	}
	if strings.Contains(text, k.Password) {
		t.Fatalf("%s: %q shows the password", what, text)
	}
}

// Guarantee: a hold and a dead-lettering refused because an ACL change
// took the pipeline's user's WRITE on the hold topic and the DLQ away
// while it runs fail at once (one produce request each: the producer does
// not retry an authorization failure) with an error wrapping
// sarama.ErrTopicAuthorizationFailed that names the topic, without the
// credentials; the letter's record is kept from being committed (not
// lost, not acknowledged). Once WRITE is granted back, hand-offs succeed
// again without a restart, and the group delivers the kept letter again
// (here after a restart), whose hand-off then succeeds: each letter
// reaches the DLQ.
func TestAHandOffDeniedWriteIsKeptNamingTheTopicAndSucceedsOnceGrantedBack(t *testing.T) {
	k := testbroker.KafkaWithACLs(t)
	logs := &lockedBuffer{}
	b := aclBackend(t, k, logs)
	tb := topology.New("acl").Hold(time.Hour).DLQ()
	q := declare(t, b, tb)
	qs := q.(*queues[msg])
	hold, dlq := qs.holds[0].name, qs.dlq
	for n := 1; n <= 2; n++ {
		if err := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: n}}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := q.Subscribe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close(t.Context()) }()
	l := receiveOne(t, r)
	if l.Value.N != 1 {
		t.Fatalf("received letter %d first, want 1", l.Value.N)
	}

	k.Deny(t, hold, sarama.AclOperationWrite)
	k.Deny(t, dlq, sarama.AclOperationWrite)
	holds, deads := countProduces(k, hold), countProduces(k, dlq)
	now := time.Now()
	l.Retries, l.FirstFailure, l.LastFailure = 1, now, now
	expectDenied(t, k, "Hold", q.Hold(t.Context(), 0, l), hold)
	l.Death = rejected("acl")
	expectDenied(t, k, "DeadLetter", q.DeadLetter(t.Context(), l), dlq)
	if h, d := holds.Load(), deads.Load(); h != 1 || d != 1 {
		t.Fatalf("%d produce requests to the hold topic and %d to the DLQ for one refused hand-off each, want 1 each", h, d)
	}
	if err := r.Settle(t.Context(), &l); !errors.Is(err, ErrNotCommitted) {
		t.Fatalf("Settle of the letter whose hand-offs were denied = %v, want ErrNotCommitted", err)
	}
	if text := logs.String(); strings.Contains(text, k.Password) {
		t.Fatalf("the log shows the password:\n%s", text)
	}

	k.Grant(t, hold, sarama.AclOperationWrite)
	k.Grant(t, dlq, sarama.AclOperationWrite)
	next := receiveOne(t, r)
	if next.Value.N != 2 {
		t.Fatalf("received letter %d after the kept one, want 2", next.Value.N)
	}
	next.Death = rejected("acl")
	if err := q.DeadLetter(t.Context(), next); err != nil {
		t.Fatalf("DeadLetter once WRITE on the DLQ is granted back = %v", err)
	}
	if err := q.Hold(t.Context(), 0, next); err != nil {
		t.Fatalf("Hold once WRITE on the hold topic is granted back = %v", err)
	}
	if err := r.Settle(t.Context(), &next); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(t.Context()); err != nil {
		t.Fatal(err)
	}

	// The restarted member is delivered the kept letter again.
	r2 := subscribe(t, q)
	again := receiveOne(t, r2)
	if again.Value.N != 1 {
		t.Fatalf("the restarted member received letter %d first, want the kept letter 1", again.Value.N)
	}
	again.Death = rejected("acl")
	if err := q.DeadLetter(t.Context(), again); err != nil {
		t.Fatalf("DeadLetter of the kept letter = %v", err)
	}
	if err := r2.Settle(t.Context(), &again); err != nil {
		t.Fatalf("Settle of the kept letter, handed off = %v", err)
	}
	dr := subscribeDead(t, q)
	seen := map[int]bool{}
	for len(seen) < 2 {
		d := receiveOne(t, dr)
		seen[d.Value.N] = true
		if err := dr.Settle(t.Context(), &d); err != nil {
			t.Fatal(err)
		}
	}
}

// Guarantee: a releaser whose user an ACL change denies READ on its hold
// topic, or WRITE on the main topic, stalls the hold partition: the
// backend's Stats report it (its Err wrapping
// sarama.ErrTopicAuthorizationFailed and naming the topic denied) on a
// few WARN lines, not one per retry, with no credentials; the held letter
// is not lost: once the ACL is granted back it is released and the stall
// ends.
func TestAReleaserDeniedReadOrWriteStallsNamingTheCauseAndResumesOnceGranted(t *testing.T) {
	for _, denied := range []struct {
		name string
		op   sarama.AclOperation
		on   func(*queues[msg]) string
	}{
		{"read on the hold topic", sarama.AclOperationRead, func(q *queues[msg]) string { return q.holds[0].name }},
		{"write on the main topic", sarama.AclOperationWrite, func(q *queues[msg]) string { return q.main }},
	} {
		t.Run(denied.name, func(t *testing.T) {
			k := testbroker.KafkaWithACLs(t)
			logs := &lockedBuffer{}
			b := aclBackend(t, k, logs)
			q := declare(t, b, topology.New("acl-release").Hold(time.Second)).(*queues[msg])
			r := subscribe(t, q)
			releaseOne(t, q, r)

			kname := denied.on(q)
			k.Deny(t, kname, denied.op)
			held := q.holdHeaders(time.Now())
			two := topology.Letter[msg]{Value: msg{N: 2}}
			if err := q.produce(t.Context(), q.holds[0].name, &two, 0, held...); err != nil {
				t.Fatal(err)
			}
			wait.For(t, "the hold partition reported stalled", func() bool {
				st := b.Stats()
				return len(st.Stalled) > 0 && st.Stalled[0].Failures >= 4
			}, func() string { return fmt.Sprintf("Stats() = %+v; log:\n%s", b.Stats(), logs.String()) })
			s := b.Stats().Stalled[0]
			if s.Topic != q.holds[0].name || !errors.Is(s.Err, ErrReleaseStalled) || !errors.Is(s.Err, sarama.ErrTopicAuthorizationFailed) ||
				!strings.Contains(s.Err.Error(), strconv.Quote(kname)) {
				t.Fatalf("Stats().Stalled[0] = %+v, want hold topic %q wrapping ErrReleaseStalled and ErrTopicAuthorizationFailed naming %q",
					s, q.holds[0].name, kname)
			}
			text := logs.String()
			if n := strings.Count(text, "level=WARN"); n != 1 {
				t.Fatalf("%d WARN lines after %d failures, want 1:\n%s", n, s.Failures, text)
			}
			if strings.Contains(text, k.Password) {
				t.Fatalf("the log shows the password:\n%s", text)
			}

			k.Grant(t, kname, denied.op)
			wait.For(t, "the stall to end, with one INFO line, once granted back", func() bool {
				return len(b.Stats().Stalled) == 0 && strings.Contains(logs.String(), "hold partition released again")
			},
				func() string { return fmt.Sprintf("Stats() = %+v; log:\n%s", b.Stats(), logs.String()) })
			l := receiveOne(t, r)
			if l.Value.N != 2 {
				t.Fatalf("received letter %d once granted back, want the held letter 2", l.Value.N)
			}
			if err := r.Settle(t.Context(), &l); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Guarantee: a DLQ reader whose user an ACL change denies READ on the DLQ
// while it runs delivers nothing and skips nothing: it logs one WARN line
// naming the DLQ and the authorization failure however many fetches the
// cluster refuses, with no credentials, and once READ is granted back it
// delivers the dead letter written meanwhile and logs that the error
// ended.
func TestADLQReaderDeniedReadWarnsOnceAndDeliversOnceGrantedBack(t *testing.T) {
	k := testbroker.KafkaWithACLs(t)
	logs := &lockedBuffer{}
	b := aclBackend(t, k, logs)
	q := declare(t, b, topology.New("acl-dead").DLQ())
	dlq := q.(*queues[msg]).dlq
	dr := subscribeDead(t, q)
	dead := func(n int) topology.Letter[msg] {
		return topology.Letter[msg]{Value: msg{N: n}, Death: rejected("acl-dead")}
	}
	if err := q.DeadLetter(t.Context(), dead(1)); err != nil {
		t.Fatal(err)
	}
	l := receiveOne(t, dr)
	if err := dr.Settle(t.Context(), &l); err != nil {
		t.Fatal(err)
	}

	var fetches atomic.Int64
	k.ControlKey(kmsg.Fetch.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		for _, ft := range req.(*kmsg.FetchRequest).Topics {
			if ft.Topic == dlq {
				fetches.Add(1)
			}
		}
		return nil, nil, false
	})
	k.Deny(t, dlq, sarama.AclOperationRead)
	start := fetches.Load()
	if err := q.DeadLetter(t.Context(), dead(2)); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the DLQ reader's fetches to be refused a few times", func() bool { return fetches.Load()-start >= 6 })
	text := logs.String()
	warns := testbroker.LinesWith(text, "level=WARN")
	if len(warns) != 1 || !strings.Contains(warns[0], "topic="+dlq) || !strings.Contains(warns[0], "not authorized") {
		t.Fatalf("%d WARN lines after %d refused fetches, want 1 naming topic %s and the authorization failure:\n%s",
			len(warns), fetches.Load()-start, dlq, text)
	}
	if strings.Contains(text, k.Password) {
		t.Fatalf("the log shows the password:\n%s", text)
	}

	k.Grant(t, dlq, sarama.AclOperationRead)
	if l := receiveOne(t, dr); l.Value.N != 2 {
		t.Fatalf("the DLQ reader delivered letter %d once granted back, want 2", l.Value.N)
	}
	wait.For(t, "an INFO line saying the error ended", func() bool {
		return strings.Contains(logs.String(), "consumer group error ended")
	}, func() string { return logs.String() })
}

// Guarantee: a topology source whose dead-lettering an ACL change denied
// (WRITE on the DLQ taken away) keeps the letter, unsettled, and hands it
// off again itself: once WRITE is granted back, without a restart, the
// letter reaches the DLQ, its handler not run again, and its partition
// commits past it and the letters acknowledged behind it.
func TestASourceHandsOffTheLetterItKeptOnceWriteIsGrantedBackAndCommitsPastIt(t *testing.T) {
	k := testbroker.KafkaWithACLs(t)
	b := aclBackend(t, k, &lockedBuffer{})
	q := declare(t, b, topology.New("aclsrc").DLQ())
	qs := q.(*queues[msg])
	k.Deny(t, qs.dlq, sarama.AclOperationWrite)
	for n := 1; n <= 2; n++ {
		if err := q.Publish(t.Context(), topology.Letter[msg]{Key: "k", Value: msg{N: n}}); err != nil {
			t.Fatal(err)
		}
	}
	src, err := topology.NewSource(topology.SourceOptions[msg]{Queues: q, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var handled [3]atomic.Int64
	p, err := pipeline.New(pipeline.Options[msg, msg]{
		Name:     "aclsrc",
		Logger:   slog.New(slog.DiscardHandler),
		Producer: producer.Options[msg]{Source: src},
		Processors: processor.Options[msg, msg]{Concurrency: 1, Handle: func(_ context.Context, m *message.Message[msg]) (msg, error) {
			handled[m.Data.N].Add(1)
			if m.Data.N == 1 {
				return msg{}, topology.Reject(errors.New("malformed"))
			}
			return m.Data, nil
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer topologytest.MustClose(t, "the pipeline", p.Stop)
	wait.Within(t, 30*time.Second, "letter 1's dead-lettering denied and kept, letter 2 acked", func() bool {
		st := src.Stats()
		return st.HandOffKept == 1 && st.HandOffFailed == 1 && st.Acked == 1
	})
	admin, err := sarama.NewClusterAdmin(k.ListenAddrs(), k.Config())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	committed := func() int64 {
		var sum int64
		for _, off := range testbroker.Committed(t, admin, qs.main, qs.groupID()) {
			sum += max(off, 0)
		}
		return sum
	}
	if got := committed(); got >= 2 {
		t.Fatalf("committed %d with letter 1 kept, want the commits stopped behind it", got)
	}

	k.Grant(t, qs.dlq, sarama.AclOperationWrite)
	wait.Within(t, 30*time.Second, "the kept letter handed off to the DLQ", func() bool {
		st := src.Stats()
		return st.DeadLettered == 1 && st.HandOffKept == 0
	})
	wait.Within(t, 30*time.Second, "the partition committed past the kept letter", func() bool { return committed() == 2 })
	if n := handled[1].Load(); n != 1 {
		t.Errorf("letter 1 handled %d times, want once: its hand-off is tried again, not its handling", n)
	}
	dr := subscribeDead(t, q)
	if d := receiveOne(t, dr); d.Value.N != 1 || d.Death == nil {
		t.Errorf("the DLQ holds letter %d (death %v), want letter 1, dead", d.Value.N, d.Death)
	}
}
