package observe_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/producer"
)

// Guarantee: a stage still connecting without a failure (a consumer
// group member given no partition) does not make its pipeline unready
// while another stage is connected; one reconnecting after failed runs
// does; and a pipeline whose stages are all still connecting is not
// ready yet.
func TestReadinessOfConnectingStages(t *testing.T) {
	stage := func(name string, st producer.State, failures int, err error) pipeline.ProducerStats {
		return pipeline.ProducerStats{StageStatus: producer.StageStatus{Stage: name, State: st, Since: time.Now(),
			ConsecutiveFailures: failures, LastError: err}}
	}
	for _, c := range []struct {
		name   string
		stages []pipeline.ProducerStats
		reason string // "" when ready
	}{
		{"a member without partitions beside a connected one", []pipeline.ProducerStats{
			stage("p.producer.0", producer.StateConnecting, 0, nil),
			stage("p.producer.1", producer.StateRunning, 0, nil)}, ""},
		{"a stage reconnecting after failed runs", []pipeline.ProducerStats{
			stage("p.producer.0", producer.StateConnecting, 2, errors.New("refused")),
			stage("p.producer.1", producer.StateRunning, 0, nil)}, "p.producer.0 connecting after 2 failed runs in a row: refused"},
		{"every stage still connecting", []pipeline.ProducerStats{
			stage("p.producer.0", producer.StateConnecting, 0, nil)}, "no source connected yet"},
	} {
		t.Run(c.name, func(t *testing.T) {
			obs := observe.New(observe.Options{})
			add(t, obs, newFakePipeline(pipeline.Stats{Name: "p", Started: time.Now(), Producers: c.stages}))
			reps := obs.Readiness(t.Context())
			if len(reps) != 1 {
				t.Fatalf("Readiness = %+v, want one report", reps)
			}
			r := reps[0]
			if r.OK != (c.reason == "") || !strings.Contains(r.Reason, c.reason) {
				t.Errorf("Readiness = %+v, want ready %v with reason %q", r, c.reason == "", c.reason)
			}
		})
	}
}
