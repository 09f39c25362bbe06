package pulsar_test

import (
	"testing"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// Failover reports on a partitioned topic name the partition's topic, the
// configured base topic, the partition index and the producer stage that
// owns the consumer (named after that stage); each partition ends with
// exactly one active stage.
func TestFailoverReportsPartitionAndStage(t *testing.T) {
	e := newEnv(t)
	if err := e.broker.CreateTopic("fo-part", 2); err != nil {
		t.Fatal(err)
	}
	var log stateLog
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"fo-part"}, Subscription: "sub", NameSuffix: "r1",
		SubscriptionType: bpulsar.Failover, ActiveStateCallback: log.add, Consumer: earliest(), Logger: testLogger()})
	_, stop := run(t, src, 2, producer.Flow{}, recordAll(newReceived()))
	type key struct {
		stage int
		part  int32
	}
	latest := func() map[key]bpulsar.ActiveState {
		log.mu.Lock()
		defer log.mu.Unlock()
		m := map[key]bpulsar.ActiveState{}
		for _, s := range log.states {
			m[key{s.Stage, s.Partition}] = s
		}
		return m
	}
	wait.Within(t, waitLimit, "both stages to report on both partitions, one active per partition", func() bool {
		m := latest()
		if len(m) != 4 {
			return false
		}
		for p := range int32(2) {
			if m[key{0, p}].Active == m[key{1, p}].Active {
				return false
			}
		}
		return true
	})
	// Consumers are named after their producer stage and the source's
	// suffix, <pipeline>.producer.<i>-<suffix>.
	for p := range 2 {
		names := map[string]bool{}
		for _, c := range e.broker.Consumers(pulsartest.PartitionTopic("fo-part", p), "sub") {
			names[c.Name] = true
		}
		if len(names) != 2 || !names["pulsar-test.producer.0-r1"] || !names["pulsar-test.producer.1-r1"] {
			t.Errorf("partition %d: consumer names %v, want the stage names with the suffix", p, names)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for k, s := range latest() {
		if k.stage != 0 && k.stage != 1 || k.part != 0 && k.part != 1 {
			t.Errorf("report from stage %d on partition %d", k.stage, k.part)
			continue
		}
		if s.Topic != pulsartest.PartitionTopic("fo-part", int(k.part)) || s.BaseTopic != pulsartest.FullTopicName("fo-part") {
			t.Errorf("stage %d partition %d: topic %q base %q", k.stage, k.part, s.Topic, s.BaseTopic)
		}
		if s.Subscription != "sub" || s.Consumer == nil {
			t.Errorf("stage %d partition %d: subscription %q consumer %v", k.stage, k.part, s.Subscription, s.Consumer)
		}
	}
}
