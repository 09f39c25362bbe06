package pulsartopology_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/pulsartopology"
)

// ttlAdmin is an Admin answering the message TTL of ttl[topic] (fallback
// for the others), or err, and keeping the topics it was asked about.
type ttlAdmin struct {
	ttl      map[string]time.Duration
	fallback time.Duration
	err      error
	hang     bool // answer only when the context ends

	mu    sync.Mutex
	asked []string
}

func (a *ttlAdmin) MessageTTL(ctx context.Context, topic string) (time.Duration, error) {
	a.mu.Lock()
	a.asked = append(a.asked, topic)
	a.mu.Unlock()
	if a.hang {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	if a.err != nil {
		return 0, a.err
	}
	if d, ok := a.ttl[topic]; ok {
		return d, nil
	}
	return a.fallback, nil
}

func (a *ttlAdmin) topics() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Sorted(slices.Values(a.asked))
}

// ttlBackend returns a backend on br reading TTLs through admin, and the
// records it logs.
func ttlBackend(t *testing.T, br *pulsartest.Broker, admin pulsartopology.Admin) (*pulsartopology.Backend[string], *logtest.Records) {
	recs := &logtest.Records{}
	o := options(br, topic.Codec[string](topic.StringCodec{}))
	o.Admin, o.Logger = admin, slog.New(recs)
	return newBackend(t, o), recs
}

// Guarantee: Declare refuses a topology with a hold not shorter than the
// message TTL in effect on its hold topic (the broker would acknowledge
// the held letters before they fall due) with a *TTLError wrapping
// ErrHoldOutlastsTTL that names the longest such hold, its topic and the
// TTL; the group's subscriptions are not made.
func TestDeclareRefusesAHoldNotShorterThanItsTopicsMessageTTL(t *testing.T) {
	br := testbroker.Pulsar(t)
	for _, ttl := range []time.Duration{30 * time.Second, time.Minute} {
		be, _ := ttlBackend(t, br, &ttlAdmin{fallback: ttl})
		top := build(t, topology.New("expiring").ForConsumerGroup("g").Hold(5*time.Second).Hold(30*time.Second).Hold(time.Minute).DLQ())
		_, err := be.Declare(ctxT(t), top)
		var te *pulsartopology.TTLError
		if !errors.Is(err, pulsartopology.ErrHoldOutlastsTTL) || !errors.As(err, &te) {
			t.Fatalf("Declare with a message TTL of %s = %v, want an error wrapping ErrHoldOutlastsTTL", ttl, err)
		}
		longest := be.TopicName(top.Holds()[2].Name)
		if te.Topic != longest || te.TTL != ttl || te.Hold != time.Minute {
			t.Errorf("TTLError %+v, want topic %q, TTL %s, hold 1m", *te, longest, ttl)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "pulsartopology:") || !strings.Contains(msg, "TTL "+ttl.String()) || !strings.Contains(msg, "hold of 1m0s") {
			t.Errorf("error %q does not start with pulsartopology: and name the TTL %s and the hold 1m0s", msg, ttl)
		}
		if n := br.Backlog(longest, "g"); n != -1 {
			t.Errorf("the group's subscription on %q exists (backlog %d) after a refused Declare", longest, n)
		}
	}
}

// Guarantee: Declare accepts holds shorter than the message TTL in effect
// on their topics (or topics whose messages never expire), having asked
// about every hold topic and the DLQ, and logs nothing about them.
func TestDeclareAcceptsHoldsShorterThanTheirTopicsMessageTTL(t *testing.T) {
	br := testbroker.Pulsar(t)
	admin := &ttlAdmin{fallback: time.Hour}
	be, recs := ttlBackend(t, br, admin)
	top := build(t, topology.New("lasting").ForConsumerGroup("g").Hold(5*time.Second).Hold(59*time.Minute).DLQ())
	dlq, _ := top.DLQ()
	admin.ttl = map[string]time.Duration{be.TopicName(top.Holds()[0].Name): 0, be.TopicName(dlq): -1}
	if _, err := be.Declare(ctxT(t), top); err != nil {
		t.Fatalf("Declare of holds shorter than the TTL: %v", err)
	}
	want := slices.Sorted(slices.Values([]string{be.TopicName(top.Holds()[0].Name), be.TopicName(top.Holds()[1].Name), be.TopicName(dlq)}))
	if got := admin.topics(); !slices.Equal(got, want) {
		t.Errorf("the admin was asked about %q, want %q", got, want)
	}
	if n := br.Backlog(be.TopicName(dlq), pulsartopology.DeadSubscription); n != 0 {
		t.Errorf("the DLQ's subscription: backlog %d, want 0 (an existing, empty subscription)", n)
	}
	if n := recs.Count(slog.LevelWarn, pulsartopology.MsgDLQTTL) + recs.Count(slog.LevelWarn, pulsartopology.MsgTTLUnread); n != 0 {
		t.Errorf("%d WARN about message TTLs, want none", n)
	}
}

// Guarantee: a DLQ with a message TTL, long or short (dead letters older
// than it are acknowledged by the broker, replayed or not), is declared,
// with a WARN.
func TestDeclareWarnsOfADLQWithAMessageTTL(t *testing.T) {
	br := testbroker.Pulsar(t)
	for _, ttl := range []time.Duration{24 * time.Hour, time.Minute} {
		be, recs := ttlBackend(t, br, &ttlAdmin{fallback: ttl})
		if _, err := be.Declare(ctxT(t), build(t, topology.New("short-lived").ForConsumerGroup("g").Hold(time.Second).DLQ())); err != nil {
			t.Fatalf("Declare with a message TTL of %s: %v", ttl, err)
		}
		if n := recs.Count(slog.LevelWarn, pulsartopology.MsgDLQTTL); n != 1 {
			t.Errorf("message TTL %s: %d WARN %q, want 1", ttl, n, pulsartopology.MsgDLQTTL)
		}
	}
}

// Guarantee: when the message TTL cannot be read (the admin API refuses),
// Declare goes on and makes what the topology needs, and the backend logs
// one WARN however many Declares it makes.
func TestDeclareWarnsOnceAndGoesOnWhenTheMessageTTLCannotBeRead(t *testing.T) {
	br := testbroker.Pulsar(t)
	be, recs := ttlBackend(t, br, &ttlAdmin{err: errors.New("401 Unauthorized")})
	for _, name := range []string{"unread-a", "unread-b", "unread-a"} {
		top := build(t, topology.New(name).ForConsumerGroup("g").Hold(time.Second).DLQ())
		if _, err := be.Declare(ctxT(t), top); err != nil {
			t.Fatalf("Declare %q where TTLs cannot be read: %v", name, err)
		}
		if n := br.Backlog(be.TopicName(top.Holds()[0].Name), "g"); n != 0 {
			t.Errorf("the group's subscription on the hold topic of %q: backlog %d, want 0", name, n)
		}
	}
	if n := recs.Count(slog.LevelWarn, pulsartopology.MsgTTLUnread); n != 1 {
		t.Errorf("%d WARN %q, want 1", n, pulsartopology.MsgTTLUnread)
	}
}

// Guarantee: a Declare whose admin does not answer returns by its
// context's deadline with an error wrapping ErrDeclare and
// context.DeadlineExceeded, not with an unchecked declaration.
func TestDeclareReturnsByItsDeadlineWhileTheAdminDoesNotAnswer(t *testing.T) {
	br := testbroker.Pulsar(t)
	be, recs := ttlBackend(t, br, &ttlAdmin{hang: true})
	ctx, cancel := context.WithTimeout(ctxT(t), time.Second)
	defer cancel()
	_, err := be.Declare(ctx, build(t, topology.New("hanging").ForConsumerGroup("g").Hold(time.Second)))
	if !errors.Is(err, pulsartopology.ErrDeclare) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Declare while the admin does not answer = %v, want ErrDeclare and context.DeadlineExceeded", err)
	}
	if n := recs.Count(slog.LevelWarn, pulsartopology.MsgTTLUnread); n != 0 {
		t.Errorf("%d WARN %q for a Declare cut short, want none", n, pulsartopology.MsgTTLUnread)
	}
}

// Guarantee: the backend's Close ends the admin calls of a Declare under
// way (their context ends when the closing starts): Close completes by
// its context's deadline rather than waiting out the Declare's
// OperationTimeout for an admin that does not answer, and the Declare
// returns an error wrapping topology.ErrClosed.
func TestCloseEndsTheAdminCallsOfADeclareUnderWay(t *testing.T) {
	br := testbroker.Pulsar(t)
	admin := &ttlAdmin{hang: true}
	be, _ := ttlBackend(t, br, admin)
	declared := make(chan error, 1)
	go func() {
		_, err := be.Declare(ctxT(t), build(t, topology.New("closing-admin").ForConsumerGroup("g").Hold(time.Second)))
		declared <- err
	}()
	wait.For(t, "the admin to be asked", func() bool { return len(admin.topics()) > 0 })
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	if err := be.Close(ctx); err != nil {
		t.Errorf("Close while a Declare waits for the admin = %v, want nil", err)
	}
	if err := <-declared; !errors.Is(err, topology.ErrClosed) {
		t.Errorf("the Declare under way when the backend closed = %v, want ErrClosed", err)
	}
}
