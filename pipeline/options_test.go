package pipeline_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/validate"
)

func batchOK(context.Context, []*message.Message[uint64], message.BatchInfo) error { return nil }

func validOptions() pipeline.Options[uint64, uint64] {
	return pipeline.Options[uint64, uint64]{
		Name:       "valid",
		Producer:   producer.Options[uint64]{Source: &gridSource{}},
		Processors: processor.Options[uint64, uint64]{Handle: identity},
		Batchers:   []batcher.Options[uint64]{{Name: "default", Handle: batchOK}},
	}
}

// Guarantee: every option rule is checked by New, before anything starts,
// and the error names the field and the rule.
func TestValidationRules(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(o *pipeline.Options[uint64, uint64])
		field  string
		rule   string
		msg    string
	}{
		{"name required", func(o *pipeline.Options[uint64, uint64]) { o.Name = "" },
			"name", "required", "name is required"},
		{"shutdown timeout positive", func(o *pipeline.Options[uint64, uint64]) { o.ShutdownTimeout = -time.Second },
			"shutdownTimeout", "gt", "shutdownTimeout must be > 0"},
		{"producer concurrency", func(o *pipeline.Options[uint64, uint64]) { o.Producer.Concurrency = -1 },
			"producer.concurrency", "gte", "producer.concurrency must be ≥ 1"},
		{"flow initial", func(o *pipeline.Options[uint64, uint64]) {
			o.Producer.Flow = producer.Flow{Initial: -5, Threshold: -6, Refill: 1}
		},
			"producer.flow.initial", "gte", "producer.flow.initial must be ≥ 2"}, // threshold -6 is reported too
		{"flow threshold positive", func(o *pipeline.Options[uint64, uint64]) { o.Producer.Flow.Threshold = -1 },
			"producer.flow.threshold", "gte", "producer.flow.threshold must be ≥ 1"},
		{"flow threshold below initial", func(o *pipeline.Options[uint64, uint64]) {
			o.Producer.Flow = producer.Flow{Initial: 10, Threshold: 10, Refill: 5}
		}, "producer.flow.threshold", "ltfield", "producer.flow.threshold must be < initial"},
		{"flow refill", func(o *pipeline.Options[uint64, uint64]) { o.Producer.Flow.Refill = -1 },
			"producer.flow.refill", "gte", "producer.flow.refill must be ≥ 1"},
		{"rate limit allowed", func(o *pipeline.Options[uint64, uint64]) {
			o.Producer.RateLimit = &producer.RateLimit{Allowed: 0, Interval: time.Second}
		}, "producer.rateLimit.allowed", "gte", "producer.rateLimit.allowed must be ≥ 1"},
		{"rate limit interval", func(o *pipeline.Options[uint64, uint64]) {
			o.Producer.RateLimit = &producer.RateLimit{Allowed: 10}
		}, "producer.rateLimit.interval", "gt", "producer.rateLimit.interval must be > 0"},
		{"restart max restarts", func(o *pipeline.Options[uint64, uint64]) { o.Producer.Restart.MaxRestarts = -1 },
			"producer.restart.maxRestarts", "gte", "producer.restart.maxRestarts must be ≥ 1"},
		{"restart window", func(o *pipeline.Options[uint64, uint64]) { o.Producer.Restart.Window = -time.Second },
			"producer.restart.window", "gt", "producer.restart.window must be > 0"},
		{"restart backoff", func(o *pipeline.Options[uint64, uint64]) { o.Producer.Restart.Backoff = -time.Second },
			"producer.restart.backoff", "gt", "producer.restart.backoff must be > 0"},
		{"restart max backoff", func(o *pipeline.Options[uint64, uint64]) {
			o.Producer.Restart.Backoff = time.Second
			o.Producer.Restart.MaxBackoff = time.Millisecond
		}, "producer.restart.maxBackoff", "gtefield", "producer.restart.maxBackoff must be ≥ backoff"},
		{"failure log interval", func(o *pipeline.Options[uint64, uint64]) {
			o.FailureLogInterval = pipeline.MaxFailureLogInterval + time.Nanosecond
		}, "failureLogInterval", "lte", "failureLogInterval must be ≤ 1h"},
		{"stall threshold", func(o *pipeline.Options[uint64, uint64]) {
			o.StallThreshold = pipeline.MaxStallThreshold + time.Nanosecond
		}, "stallThreshold", "lte", "stallThreshold must be ≤ 24h"},
		{"stall check interval too long", func(o *pipeline.Options[uint64, uint64]) {
			o.StallCheckInterval = pipeline.MaxStallCheckInterval + time.Nanosecond
		}, "stallCheckInterval", "lte", "stallCheckInterval must be ≤ 1m"},
		{"stall check interval too short", func(o *pipeline.Options[uint64, uint64]) {
			o.StallCheckInterval = pipeline.MinStallCheckInterval - time.Nanosecond
		}, "stallCheckInterval", "gte", "stallCheckInterval must be ≥ 10ms (or negative: no stall watch)"},
		{"processors concurrency", func(o *pipeline.Options[uint64, uint64]) { o.Processors.Concurrency = -1 },
			"processors.concurrency", "gte", "processors.concurrency must be ≥ 1"},
		{"processors max demand", func(o *pipeline.Options[uint64, uint64]) { o.Processors.MaxDemand = -1 },
			"processors.maxDemand", "gte", "processors.maxDemand must be ≥ 1"},
		{"processors handle", func(o *pipeline.Options[uint64, uint64]) { o.Processors.Handle = nil },
			"processors.handle", "required", "processors.handle is required"},
		{"batcher name", func(o *pipeline.Options[uint64, uint64]) { o.Batchers[0].Name = "" },
			"batchers[0].name", "required", "batchers[0].name is required"},
		{"batcher name unique", func(o *pipeline.Options[uint64, uint64]) {
			o.Batchers = append(o.Batchers, batcher.Options[uint64]{Name: "default", Handle: batchOK})
		}, "batchers[1].name", "unique", `batchers[1].name must be unique: "default" is already the name of batchers[0]`},
		{"batch size", func(o *pipeline.Options[uint64, uint64]) { o.Batchers[0].BatchSize = -1 },
			"batchers[0].batchSize", "gte", "batchers[0].batchSize must be ≥ 1"},
		{"batch timeout", func(o *pipeline.Options[uint64, uint64]) { o.Batchers[0].BatchTimeout = -time.Second },
			"batchers[0].batchTimeout", "gt", "batchers[0].batchTimeout must be > 0"},
		{"batcher concurrency", func(o *pipeline.Options[uint64, uint64]) { o.Batchers[0].Concurrency = -2 },
			"batchers[0].concurrency", "gte", "batchers[0].concurrency must be ≥ 1"},
		{"batcher handle", func(o *pipeline.Options[uint64, uint64]) { o.Batchers[0].Handle = nil },
			"batchers[0].handle", "required", "batchers[0].handle is required"},
		// A nil drainer passed New and crashed the process at the end of
		// the drain, when the pipeline called its Drain.
		{"drainer not nil", func(o *pipeline.Options[uint64, uint64]) {
			o.Drainers = []pipeline.Drainer{nil}
		}, "drainers[0]", "required", "drainers[0] is required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := validOptions()
			tc.mutate(&o)
			p, err := pipeline.New(o)
			if p != nil || err == nil {
				t.Fatalf("New accepted invalid options (%s)", tc.name)
			}
			if !errors.Is(err, validate.ErrInvalid) {
				t.Fatalf("error %v does not wrap validate.ErrInvalid", err)
			}
			var errs validate.Errors
			if !errors.As(err, &errs) {
				t.Fatalf("error %T is not validate.Errors", err)
			}
			var got *validate.FieldError
			for _, e := range errs {
				if e.Field == tc.field {
					got = e
				} else if tc.field != "producer.flow.initial" {
					t.Fatalf("unexpected extra problem %q", e.Message)
				}
			}
			if got == nil || got.Rule != tc.rule || got.Message != tc.msg {
				t.Fatalf("got %v, want {%s %s %q}", err, tc.field, tc.rule, tc.msg)
			}
		})
	}
}

// Guarantee: every broken rule is reported at once, not only the first.
func TestValidationReportsEveryProblem(t *testing.T) {
	o := validOptions()
	o.Name = ""
	o.Processors.Concurrency = -1
	o.Batchers[0].BatchSize = -1
	_, err := pipeline.New(o)
	var errs validate.Errors
	if !errors.As(err, &errs) || len(errs) != 3 {
		t.Fatalf("New = %v, want 3 problems", err)
	}
	for _, f := range []string{"name", "processors.concurrency", "batchers[0].batchSize"} {
		if !errs.Has(f, "") {
			t.Fatalf("%v does not mention %s", err, f)
		}
	}
}

// Guarantee: a Flow with only Initial set derives the rest from it.
func TestFlowDefaultsFollowInitial(t *testing.T) {
	for in, want := range map[producer.Flow]producer.Flow{
		{}:                          {Initial: 100, Threshold: 50, Refill: 50},
		{Initial: 10}:               {Initial: 10, Threshold: 5, Refill: 5},
		{Initial: 7}:                {Initial: 7, Threshold: 3, Refill: 4},
		{Initial: 20, Threshold: 5}: {Initial: 20, Threshold: 5, Refill: 15},
		{Initial: 20, Refill: 3}:    {Initial: 20, Threshold: 10, Refill: 3},
	} {
		o := validOptions()
		o.Producer.Flow = in
		p := mustNew(t, o)
		if got := p.Topology().Producer.Flow; got != want {
			t.Errorf("Flow %+v became %+v, want %+v", in, got, want)
		}
	}
}

// Guarantee: zero values take the documented defaults, visible in Topology.
func TestDefaults(t *testing.T) {
	p := mustNew(t, validOptions())
	top := p.Topology()
	if top.Producer.Flow != (producer.Flow{Initial: 100, Threshold: 50, Refill: 50}) {
		t.Fatalf("default flow %+v, want 100/50/50", top.Producer.Flow)
	}
	if len(top.Producer.Stages) != 1 || top.Producer.Stages[0] != "valid.producer.0" {
		t.Fatalf("producer stages %v", top.Producer.Stages)
	}
	if top.Processors.Concurrency != runtime.GOMAXPROCS(0) || top.Processors.MaxDemand != 10 {
		t.Fatalf("processors %+v", top.Processors)
	}
	b := top.Batchers[0]
	if b.BatchSize != 100 || b.BatchTimeout != time.Second || b.Concurrency != 1 || b.Stage != "valid.batcher.default" {
		t.Fatalf("batcher %+v", b)
	}
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Guarantee: zero durations, restart rules and counts take the defaults
// the field comments and docs/operations.md give.
func TestWithDefaultsGivesTheDocumentedDefaults(t *testing.T) {
	o := validOptions().WithDefaults()
	for _, c := range []struct {
		field     string
		got, want any
	}{
		{"ShutdownTimeout", o.ShutdownTimeout, 30 * time.Second},
		{"FailureLogInterval", o.FailureLogInterval, 10 * time.Second},
		{"StallCheckInterval", o.StallCheckInterval, time.Second},
		{"StallThreshold", o.StallThreshold, 30 * time.Second},
		{"Producer.Concurrency", o.Producer.Concurrency, 1},
		{"Producer.Restart", o.Producer.Restart, producer.Restart{MaxRestarts: 3, Window: 5 * time.Second,
			Backoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Second, MaxConsecutiveFailures: 5, MaxFailingTime: 2 * time.Minute}},
		{"Batchers[0].MaxDemand", o.Batchers[0].MaxDemand, 64},
	} {
		if c.got != c.want {
			t.Errorf("default %s = %+v, want %+v", c.field, c.got, c.want)
		}
	}
}

// Guarantee: SetRateLimit rejects an invalid limit with a field error.
func TestSetRateLimitValidates(t *testing.T) {
	p := mustNew(t, validOptions())
	err := p.SetRateLimit(&producer.RateLimit{Allowed: 0, Interval: time.Second})
	var errs validate.Errors
	if !errors.As(err, &errs) || !errs.Has("rateLimit.allowed", "gte") {
		t.Fatalf("SetRateLimit = %v, want rateLimit.allowed error", err)
	}
	if err := p.SetRateLimit(nil); err != nil {
		t.Fatal(err)
	}
}

type order struct{ ID int }

// Guarantee: field paths are clean when the payload types are named types
// (a generic Options instantiated with them has dots in its type name).
func TestValidationWithNamedPayloadTypes(t *testing.T) {
	_, err := pipeline.New(pipeline.Options[order, order]{
		Name: "orders",
		Processors: processor.Options[order, order]{
			Concurrency: -1,
			Handle:      func(_ context.Context, m *message.Message[order]) (order, error) { return m.Data, nil },
		},
	})
	var errs validate.Errors
	if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Message != "processors.concurrency must be ≥ 1" {
		t.Fatalf("New = %v", err)
	}
}

// Guarantee: each bound of the pipeline's own durations is itself
// accepted (the value one past it is refused, see TestValidationRules):
// FailureLogInterval at MaxFailureLogInterval, StallThreshold at
// MaxStallThreshold, StallCheckInterval at MinStallCheckInterval and at
// MaxStallCheckInterval.
func TestPipelineDurationsAreAcceptedAtTheirBounds(t *testing.T) {
	for name, set := range map[string]func(o *pipeline.Options[uint64, uint64]){
		"failureLogInterval at MaxFailureLogInterval": func(o *pipeline.Options[uint64, uint64]) { o.FailureLogInterval = pipeline.MaxFailureLogInterval },
		"stallThreshold at MaxStallThreshold":         func(o *pipeline.Options[uint64, uint64]) { o.StallThreshold = pipeline.MaxStallThreshold },
		"stallCheckInterval at MinStallCheckInterval": func(o *pipeline.Options[uint64, uint64]) { o.StallCheckInterval = pipeline.MinStallCheckInterval },
		"stallCheckInterval at MaxStallCheckInterval": func(o *pipeline.Options[uint64, uint64]) { o.StallCheckInterval = pipeline.MaxStallCheckInterval },
	} {
		o := validOptions()
		set(&o)
		if err := o.WithDefaults().Validate(); err != nil {
			t.Errorf("%s refused: %v", name, err)
		}
	}
}
