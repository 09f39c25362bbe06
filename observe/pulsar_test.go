package observe_test

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/sources/pulsar"
)

// fixedPulsar is a Pulsar source whose stats are given.
type fixedPulsar pulsar.Stats

func (f fixedPulsar) Stats() pulsar.Stats { return pulsar.Stats(f) }

// Guarantee: a Pulsar source added with AddPulsar has each of its stats
// exported as a metric labelled by its subscription, and listed in /stats.
func TestPulsarSourceStatsAreExported(t *testing.T) {
	st := pulsar.Stats{Consumers: 2, Replaced: 3, DroppedAcks: 4, CallbackPanics: 5, Received: 600, Redelivered: 7,
		Acked: 15, Nacked: 8, DeadLettered: 9, PermitsGranted: 1000, PermitsAvailable: 11, ClientQueue: 12, ReconnectFailures: 13, SubscribesAbandoned: 14}
	obs := observe.New(observe.Options{})
	if err := obs.AddPulsar("billing", fixedPulsar(st)); err != nil {
		t.Fatal(err)
	}
	reg := newRegistry(t, obs)
	sub := map[string]string{"subscription": "billing"}
	for name, want := range map[string]float64{
		"boulevard_pulsar_consumers":                    2,
		"boulevard_pulsar_consumers_replaced_total":     3,
		"boulevard_pulsar_acks_dropped_total":           4,
		"boulevard_pulsar_callback_panics_total":        5,
		"boulevard_pulsar_messages_received_total":      600,
		"boulevard_pulsar_messages_redelivered_total":   7,
		"boulevard_pulsar_messages_acked_total":         15,
		"boulevard_pulsar_messages_nacked_total":        8,
		"boulevard_pulsar_messages_dead_lettered_total": 9,
		"boulevard_pulsar_permits_granted_total":        1000,
		"boulevard_pulsar_permits_available":            11,
		"boulevard_pulsar_client_queue_messages":        12,
		"boulevard_pulsar_reconnect_failures_total":     13,
		"boulevard_pulsar_subscribes_abandoned_total":   14,
	} {
		if got, ok := find(t, reg, name, sub); !ok || got != want {
			t.Errorf("%s = %v (found %v), want %v", name, got, ok, want)
		}
	}
	problems, err := testutil.CollectAndLint(obs)
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range problems {
		t.Errorf("lint: %s: %s", pr.Metric, pr.Text)
	}
	rr := httptest.NewRecorder()
	obs.Handler(nil).ServeHTTP(rr, httptest.NewRequest("GET", "/stats", nil))
	var snap observe.Snapshot
	if err := json.NewDecoder(rr.Body).Decode(&snap); err != nil {
		t.Fatal(err)
	}
	if len(snap.Pulsar) != 1 || snap.Pulsar[0].Subscription != "billing" || snap.Pulsar[0].Stats != st {
		t.Errorf("/stats pulsar = %+v, want billing %+v", snap.Pulsar, st)
	}
}

// Guarantee: a name that is not valid UTF-8 (a subscription read from the
// environment, say) never crashes a scrape: /metrics answers 200, with
// the invalid bytes of the label value replaced by U+FFFD.
func TestScrapeSurvivesNamesThatAreNotUTF8(t *testing.T) {
	obs := observe.New(observe.Options{})
	if err := obs.AddPulsar("billing\xff", fixedPulsar(pulsar.Stats{Consumers: 1})); err != nil {
		t.Fatal(err)
	}
	rr := httptest.NewRecorder()
	obs.Handler(nil).ServeHTTP(rr, httptest.NewRequest("GET", "/metrics", nil))
	if want := "boulevard_pulsar_consumers{subscription=\"billing\uFFFD\"} 1"; rr.Code != 200 || !strings.Contains(rr.Body.String(), want) {
		t.Fatalf("/metrics = %d, want 200 with %s:\n%s", rr.Code, want, rr.Body)
	}
}
