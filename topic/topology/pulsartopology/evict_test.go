package pulsartopology_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/pulsartopology"
)

// restAdmin is an EvictionAdmin reading a namespace's backlog quotas and
// subscription expiration time through Pulsar's admin REST API (as
// pulsaradmin's Namespaces() does), served at url; topics never expire
// messages (no TTL).
type restAdmin struct {
	url    string
	client *http.Client
}

// namespacePath returns the admin path of the namespace of topic, a full
// name persistent://tenant/namespace/local.
func namespacePath(topic string) (string, error) {
	rest, ok := strings.CutPrefix(topic, "persistent://")
	parts := strings.SplitN(rest, "/", 3)
	if !ok || len(parts) != 3 {
		return "", fmt.Errorf("topic %q is not a full name", topic)
	}
	return "/admin/v2/namespaces/" + parts[0] + "/" + parts[1], nil
}

// get decodes into v the answer to GET of the policy of topic's namespace;
// set is false on 204 No Content (unset).
func (a *restAdmin) get(ctx context.Context, topic, policy string, v any) (set bool, err error) {
	ns, err := namespacePath(topic)
	if err != nil {
		return false, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.url+ns+"/"+policy, nil)
	if err != nil {
		return false, err
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		return true, json.NewDecoder(resp.Body).Decode(v)
	case http.StatusNoContent:
		return false, nil
	default:
		return false, fmt.Errorf("GET %s: %s", policy, resp.Status)
	}
}

func (a *restAdmin) MessageTTL(context.Context, string) (time.Duration, error) { return 0, nil }

func (a *restAdmin) BacklogQuotas(ctx context.Context, topic string) ([]pulsartopology.BacklogQuota, error) {
	var m map[string]pulsartest.BacklogQuota
	if _, err := a.get(ctx, topic, "backlogQuotaMap", &m); err != nil {
		return nil, err
	}
	var out []pulsartopology.BacklogQuota
	for kind, q := range m {
		out = append(out, pulsartopology.BacklogQuota{Type: kind, LimitSize: q.LimitSize,
			LimitTime: time.Duration(q.LimitTime) * time.Second, Policy: q.Policy})
	}
	return out, nil
}

func (a *restAdmin) SubscriptionExpiration(ctx context.Context, topic string) (time.Duration, error) {
	var minutes int
	set, err := a.get(ctx, topic, "subscriptionExpirationTime", &minutes)
	if err != nil || !set {
		return 0, err
	}
	return time.Duration(minutes) * time.Minute, nil
}

// adminServer serves br's admin REST API until the test ends and returns
// its URL.
func adminServer(t *testing.T, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// setPolicy sets a policy of namespace public/default through the admin
// REST API at url.
func setPolicy(t *testing.T, url, policy, body string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/admin/v2/namespaces/public/default/"+policy, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("setting %s %s: %s", policy, body, resp.Status)
	}
}

// evictionBackend returns a backend on br whose Admin reads the admin REST
// API at url, with accept as Options.AcceptBacklogEviction, and the
// records it logs.
func evictionBackend(t *testing.T, br *pulsartest.Broker, url string, accept bool) (*pulsartopology.Backend[string], *logtest.Records) {
	recs := &logtest.Records{}
	o := options(br, topic.Codec[string](topic.StringCodec{}))
	o.Admin, o.Logger = &restAdmin{url: url, client: &http.Client{}}, slog.New(recs)
	o.AcceptBacklogEviction = accept
	return newBackend(t, o), recs
}

// Guarantee: Declare refuses a topology whose hold topic or DLQ is under a
// backlog quota with policy consumer_backlog_eviction (the broker drops
// the oldest unacknowledged letters over the quota, however young), as
// the admin REST API reports it, with an *EvictionError wrapping
// ErrEvictionPolicy that names the topic, the quota and its policy; the
// subscriptions are not made.
func TestDeclareRefusesATopologyUnderAnEvictingBacklogQuota(t *testing.T) {
	for _, tc := range []struct {
		kind, body string
		want       []string
	}{
		{"destination_storage", `{"limitSize":1048576,"limitTime":-1,"policy":"consumer_backlog_eviction"}`,
			[]string{"destination_storage", "limitSize 1048576", "consumer_backlog_eviction", "hold topic"}},
		{"message_age", `{"limitSize":-1,"limitTime":3600,"policy":"consumer_backlog_eviction"}`,
			[]string{"message_age", "limitTime 3600", "consumer_backlog_eviction", "hold topic"}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			br := testbroker.Pulsar(t)
			url := adminServer(t, br.AdminHandler())
			setPolicy(t, url, "backlogQuota?backlogQuotaType="+tc.kind, tc.body)
			be, _ := evictionBackend(t, br, url, false)
			top := build(t, topology.New("evicted").ForConsumerGroup("g").Hold(5*time.Second).DLQ())
			_, err := be.Declare(ctxT(t), top)
			var ee *pulsartopology.EvictionError
			if !errors.Is(err, pulsartopology.ErrEvictionPolicy) || !errors.As(err, &ee) {
				t.Fatalf("Declare under an evicting backlog quota = %v, want an error wrapping ErrEvictionPolicy", err)
			}
			hold := be.TopicName(top.Holds()[0].Name)
			if ee.Topic != hold || ee.Policy != pulsartopology.PolicyBacklogQuota || ee.Quota.Type != tc.kind || ee.DLQ {
				t.Errorf("EvictionError %+v, want hold topic %q, policy %s, quota type %s", *ee, hold, pulsartopology.PolicyBacklogQuota, tc.kind)
			}
			msg := err.Error()
			for _, w := range append(tc.want, "pulsartopology:", hold) {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not name %s", msg, w)
				}
			}
			if n := br.Backlog(hold, "g"); n != -1 {
				t.Errorf("the group's subscription on %q exists (backlog %d) after a refused Declare", hold, n)
			}
		})
	}
}

// Guarantee: Declare refuses a topology with a DLQ whose namespace
// expires subscriptions (its subscription DeadSubscription, without a
// consumer between replays, would be deleted with its dead letters),
// naming the DLQ and the expiration; a topology without a DLQ is declared
// with a WARN (held letters are lost only while every reader is down for
// longer).
func TestDeclareRefusesADLQWhoseSubscriptionExpires(t *testing.T) {
	br := testbroker.Pulsar(t)
	url := adminServer(t, br.AdminHandler())
	setPolicy(t, url, "subscriptionExpirationTime", "90")
	be, recs := evictionBackend(t, br, url, false)
	top := build(t, topology.New("expiring-dlq").ForConsumerGroup("g").Hold(5*time.Second).DLQ())
	_, err := be.Declare(ctxT(t), top)
	var ee *pulsartopology.EvictionError
	if !errors.Is(err, pulsartopology.ErrEvictionPolicy) || !errors.As(err, &ee) {
		t.Fatalf("Declare of a DLQ whose subscriptions expire = %v, want an error wrapping ErrEvictionPolicy", err)
	}
	dlq, _ := top.DLQ()
	if ee.Topic != be.TopicName(dlq) || !ee.DLQ || ee.Policy != pulsartopology.PolicySubscriptionExpiration || ee.Expiration != 90*time.Minute {
		t.Errorf("EvictionError %+v, want the DLQ %q, policy %s, expiration 1h30m", *ee, be.TopicName(dlq), pulsartopology.PolicySubscriptionExpiration)
	}
	if msg := err.Error(); !strings.Contains(msg, "1h30m0s (90 minutes)") || !strings.Contains(msg, be.TopicName(dlq)) {
		t.Errorf("error %q does not name the expiration and the DLQ", msg)
	}
	if n := br.Backlog(be.TopicName(dlq), pulsartopology.DeadSubscription); n != -1 {
		t.Errorf("the DLQ's subscription exists (backlog %d) after a refused Declare", n)
	}
	if _, err := be.Declare(ctxT(t), build(t, topology.New("expiring-hold").ForConsumerGroup("g").Hold(5*time.Second))); err != nil {
		t.Fatalf("Declare of a topology without a DLQ whose subscriptions expire: %v", err)
	}
	if n := recs.Count(slog.LevelWarn, pulsartopology.MsgHoldExpiry); n != 1 {
		t.Errorf("%d WARN %q, want 1", n, pulsartopology.MsgHoldExpiry)
	}
}

// Guarantee: Declare accepts backlog quotas that do not drop letters
// (producer_request_hold, producer_exception), and an evicting one when
// Options.AcceptBacklogEviction says so, with no WARN.
func TestDeclareAcceptsBacklogQuotasThatKeepLetters(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		accept     bool
	}{
		{"producer_request_hold", `{"limitSize":1048576,"limitTime":-1,"policy":"producer_request_hold"}`, false},
		{"producer_exception", `{"limitSize":1048576,"limitTime":-1,"policy":"producer_exception"}`, false},
		{"accepted eviction", `{"limitSize":1073741824,"limitTime":-1,"policy":"consumer_backlog_eviction"}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			br := testbroker.Pulsar(t)
			url := adminServer(t, br.AdminHandler())
			setPolicy(t, url, "backlogQuota?backlogQuotaType=destination_storage", tc.body)
			be, recs := evictionBackend(t, br, url, tc.accept)
			top := build(t, topology.New("kept").ForConsumerGroup("g").Hold(5*time.Second).DLQ())
			if _, err := be.Declare(ctxT(t), top); err != nil {
				t.Fatalf("Declare under backlog quota %s: %v", tc.body, err)
			}
			dlq, _ := top.DLQ()
			if n := br.Backlog(be.TopicName(dlq), pulsartopology.DeadSubscription); n != 0 {
				t.Errorf("the DLQ's subscription: backlog %d, want 0", n)
			}
			if n := recs.Count(slog.LevelWarn, pulsartopology.MsgEvictionUnread) + recs.Count(slog.LevelWarn, pulsartopology.MsgHoldExpiry); n != 0 {
				t.Errorf("%d WARN about eviction, want none", n)
			}
		})
	}
}

// Guarantee: when the admin REST API fails to report the policies (an
// error status), all of them or either one alone, Declare goes on and
// makes what the topology needs, and the backend logs one WARN however
// many Declares it makes.
func TestDeclareWarnsOnceAndGoesOnWhenEvictionPoliciesCannotBeRead(t *testing.T) {
	for _, refused := range []string{"", "backlogQuotaMap", "subscriptionExpirationTime"} {
		t.Run("refused "+cmp.Or(refused, "all"), func(t *testing.T) {
			br := testbroker.Pulsar(t)
			url := adminServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if refused != "" && !strings.HasSuffix(r.URL.Path, "/"+refused) {
					w.WriteHeader(http.StatusNoContent)
					return
				}
				http.Error(w, `{"reason":"Unauthorized"}`, http.StatusUnauthorized)
			}))
			be, recs := evictionBackend(t, br, url, false)
			for _, name := range []string{"unread-a", "unread-b"} {
				top := build(t, topology.New(name).ForConsumerGroup("g").Hold(time.Second).DLQ())
				if _, err := be.Declare(ctxT(t), top); err != nil {
					t.Fatalf("Declare %q where policies cannot be read: %v", name, err)
				}
			}
			if n := recs.Count(slog.LevelWarn, pulsartopology.MsgEvictionUnread); n != 1 {
				t.Errorf("%d WARN %q, want 1", n, pulsartopology.MsgEvictionUnread)
			}
		})
	}
}

// Guarantee: a DLQ under a backlog quota with policy
// consumer_backlog_eviction is refused as a DLQ: the *EvictionError says
// so (DLQ set) and its message names the DLQ and the letters' replay.
func TestDeclareRefusesADLQUnderAnEvictingBacklogQuota(t *testing.T) {
	br := testbroker.Pulsar(t)
	url := adminServer(t, br.AdminHandler())
	setPolicy(t, url, "backlogQuota?backlogQuotaType=destination_storage", `{"limitSize":1048576,"limitTime":-1,"policy":"consumer_backlog_eviction"}`)
	be, _ := evictionBackend(t, br, url, false)
	top := build(t, topology.New("evicted-dlq").ForConsumerGroup("g").DLQ())
	_, err := be.Declare(ctxT(t), top)
	var ee *pulsartopology.EvictionError
	if !errors.As(err, &ee) {
		t.Fatalf("Declare of a DLQ under an evicting backlog quota = %v, want an *EvictionError", err)
	}
	dlq, _ := top.DLQ()
	if ee.Topic != be.TopicName(dlq) || !ee.DLQ || ee.Policy != pulsartopology.PolicyBacklogQuota {
		t.Errorf("EvictionError %+v, want the DLQ %q, DLQ set, policy %s", *ee, be.TopicName(dlq), pulsartopology.PolicyBacklogQuota)
	}
	if msg := err.Error(); !strings.Contains(msg, "on DLQ") || !strings.Contains(msg, "before they are replayed") {
		t.Errorf("error %q does not name the DLQ and the replay of its letters", msg)
	}
}

// Guarantee: a Declare whose admin REST server does not answer returns by
// its context's deadline with an error wrapping ErrDeclare and
// context.DeadlineExceeded; a Close while such a Declare is under way
// ends it at once (ErrClosed) and completes by its own deadline.
func TestDeclareAndCloseReturnByTheirDeadlineWhileTheAdminServerHangs(t *testing.T) {
	br := testbroker.Pulsar(t)
	asked := make(chan struct{}, 16)
	url := adminServer(t, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		asked <- struct{}{}
		<-r.Context().Done() // answers nothing until the client gives up
	}))
	be, _ := evictionBackend(t, br, url, false)
	ctx, cancel := context.WithTimeout(ctxT(t), time.Second)
	defer cancel()
	_, err := be.Declare(ctx, build(t, topology.New("hung").ForConsumerGroup("g").Hold(time.Second)))
	if !errors.Is(err, pulsartopology.ErrDeclare) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Declare while the admin server hangs = %v, want ErrDeclare and context.DeadlineExceeded", err)
	}
	declared := make(chan error, 1)
	go func() {
		_, err := be.Declare(ctxT(t), build(t, topology.New("hung-close").ForConsumerGroup("g").Hold(time.Second)))
		declared <- err
	}()
	<-asked // the first Declare's request
	<-asked // the second's
	cctx, ccancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer ccancel()
	if err := be.Close(cctx); err != nil {
		t.Errorf("Close while a Declare waits for the admin server = %v, want nil", err)
	}
	if err := <-declared; !errors.Is(err, topology.ErrClosed) {
		t.Errorf("the Declare under way when the backend closed = %v, want ErrClosed", err)
	}
}

// Guarantee: a message_age quota with policy consumer_backlog_eviction
// counts a letter's age from its publish, not from its due time: a letter
// held for an hour is dropped, before it falls due, when the broker finds
// it older than a 10-minute limit; which is why Declare refuses such a
// hold under such a quota, Options.AcceptBacklogEviction or not.
func TestAMessageAgeEvictionQuotaDropsHeldLettersBeforeTheyFallDue(t *testing.T) {
	br := testbroker.Pulsar(t)
	url := adminServer(t, br.AdminHandler())
	setPolicy(t, url, "backlogQuota?backlogQuotaType=message_age", `{"limitSize":-1,"limitTime":600,"policy":"consumer_backlog_eviction"}`)
	top := build(t, topology.New("aged").ForConsumerGroup("g").Hold(time.Hour))
	for _, accept := range []bool{false, true} {
		checking, _ := evictionBackend(t, br, url, accept)
		if _, err := checking.Declare(ctxT(t), top); !errors.Is(err, pulsartopology.ErrEvictionPolicy) {
			t.Fatalf("Declare (AcceptBacklogEviction %t) of a 1h hold under a 10-minute message_age eviction quota = %v, want an error wrapping ErrEvictionPolicy", accept, err)
		}
	}
	be := newBackend(t, options(br, topic.Codec[string](topic.StringCodec{}))) // no Admin: nothing checked
	if _, err := be.Declare(ctxT(t), top); err != nil {
		t.Fatalf("Declare without an Admin: %v", err)
	}
	hold := be.TopicName(top.Holds()[0].Name)
	if _, err := br.Publish(ctxT(t), hold, pulsartest.Message{Payload: []byte("held"), DeliverAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	br.CheckBacklogQuotas()
	if n := br.Backlog(hold, "g"); n != 1 {
		t.Fatalf("held letters just after the hold: %d, want 1", n)
	}
	br.SetClock(func() time.Time { return time.Now().Add(15 * time.Minute) })
	br.CheckBacklogQuotas()
	if n := br.Backlog(hold, "g"); n != 0 {
		t.Errorf("held letters 15 minutes into a 1h hold under a 10-minute quota: %d, want 0 (dropped)", n)
	}
}

// Guarantee: Declare refuses a hold of at least 90% of the limitTime of a
// message_age quota with policy consumer_backlog_eviction on its topic
// even with Options.AcceptBacklogEviction (the broker evicts messages
// published more than 90% of the limit ago, so every held letter is
// dropped before it falls due once the quota trips), with an
// *EvictionError wrapping ErrEvictionPolicy that names the hold, the
// limit and the limit it takes; the subscriptions are not made.
func TestAcceptBacklogEvictionDoesNotAcceptAMessageAgeQuotaThatDropsHeldLettersBeforeTheyFallDue(t *testing.T) {
	for _, tc := range []struct {
		hold time.Duration
		want []string
	}{
		{time.Hour, []string{"1h0m0s", "limitTime 600", "above 4000", "message_age", "consumer_backlog_eviction"}},
		{9 * time.Minute, []string{"9m0s", "limitTime 600", "above 600", "message_age", "consumer_backlog_eviction"}},
	} {
		t.Run(tc.hold.String(), func(t *testing.T) {
			br := testbroker.Pulsar(t)
			url := adminServer(t, br.AdminHandler())
			setPolicy(t, url, "backlogQuota?backlogQuotaType=message_age", `{"limitSize":-1,"limitTime":600,"policy":"consumer_backlog_eviction"}`)
			be, _ := evictionBackend(t, br, url, true)
			top := build(t, topology.New("aged").ForConsumerGroup("g").Hold(tc.hold).DLQ())
			_, err := be.Declare(ctxT(t), top)
			var ee *pulsartopology.EvictionError
			if !errors.Is(err, pulsartopology.ErrEvictionPolicy) || !errors.As(err, &ee) {
				t.Fatalf("Declare accepting backlog eviction of a %s hold under a 10-minute message_age eviction quota = %v, want an *EvictionError wrapping ErrEvictionPolicy", tc.hold, err)
			}
			hold := be.TopicName(top.Holds()[0].Name)
			if ee.Topic != hold || ee.DLQ || ee.Policy != pulsartopology.PolicyBacklogQuota || ee.Quota.Type != "message_age" ||
				ee.Quota.LimitTime != 10*time.Minute || ee.Hold != tc.hold {
				t.Errorf("EvictionError %+v, want hold topic %q, policy %s, a 10-minute message_age quota, hold %s", *ee, hold, pulsartopology.PolicyBacklogQuota, tc.hold)
			}
			msg := err.Error()
			for _, w := range append(tc.want, "pulsartopology:", hold) {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not name %s", msg, w)
				}
			}
			if strings.Contains(msg, "accept it") {
				t.Errorf("error %q offers Options.AcceptBacklogEviction, which does not accept it", msg)
			}
			if n := br.Backlog(hold, "g"); n != -1 {
				t.Errorf("the group's subscription on %q exists (backlog %d) after a refused Declare", hold, n)
			}
		})
	}
}

// Guarantee: without Options.AcceptBacklogEviction, a Declare whose
// shorter hold is under an evicting message_age quota and whose longer
// hold is dropped by it before it falls due is refused for the longer
// hold (EvictionError.Hold set), which no acceptance would make right.
func TestDeclareRefusesForTheHoldAMessageAgeEvictionQuotaDropsBeforeItFallsDue(t *testing.T) {
	br := testbroker.Pulsar(t)
	url := adminServer(t, br.AdminHandler())
	setPolicy(t, url, "backlogQuota?backlogQuotaType=message_age", `{"limitSize":-1,"limitTime":600,"policy":"consumer_backlog_eviction"}`)
	be, _ := evictionBackend(t, br, url, false)
	top := build(t, topology.New("aged-two").ForConsumerGroup("g").Hold(5*time.Second).Hold(time.Hour))
	_, err := be.Declare(ctxT(t), top)
	var ee *pulsartopology.EvictionError
	if !errors.As(err, &ee) {
		t.Fatalf("Declare of holds of 5s and 1h under a 10-minute message_age eviction quota = %v, want an *EvictionError", err)
	}
	long := be.TopicName(top.Holds()[1].Name)
	if ee.Topic != long || ee.Hold != time.Hour {
		t.Errorf("EvictionError %+v, want the 1h hold topic %q, hold 1h0m0s", *ee, long)
	}
}

// Guarantee: a message_age quota with policy consumer_backlog_eviction
// whose 90% of limitTime is longer than every hold is accepted by
// Options.AcceptBacklogEviction (a held letter falls due before the broker
// may evict it), with no WARN, and the subscriptions are made.
func TestAcceptBacklogEvictionAcceptsAMessageAgeQuotaLongerThanTheHolds(t *testing.T) {
	br := testbroker.Pulsar(t)
	url := adminServer(t, br.AdminHandler())
	setPolicy(t, url, "backlogQuota?backlogQuotaType=message_age", `{"limitSize":-1,"limitTime":600,"policy":"consumer_backlog_eviction"}`)
	be, recs := evictionBackend(t, br, url, true)
	top := build(t, topology.New("young").ForConsumerGroup("g").Hold(time.Minute).Hold(8*time.Minute+59*time.Second).DLQ())
	if _, err := be.Declare(ctxT(t), top); err != nil {
		t.Fatalf("Declare accepting backlog eviction of holds of 1m and 8m59s under a 10-minute message_age eviction quota: %v", err)
	}
	for _, h := range top.Holds() {
		if n := br.Backlog(be.TopicName(h.Name), "g"); n != 0 {
			t.Errorf("the group's subscription on the hold topic %q: backlog %d, want 0", be.TopicName(h.Name), n)
		}
	}
	if n := recs.Count(slog.LevelWarn, pulsartopology.MsgEvictionUnread) + recs.Count(slog.LevelWarn, pulsartopology.MsgHoldExpiry); n != 0 {
		t.Errorf("%d WARN about eviction, want none", n)
	}
}
