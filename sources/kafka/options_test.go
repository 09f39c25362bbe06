package kafka_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/validate"
)

// Guarantee: the source owns the sarama fields it documents: whatever the
// user's Config holds for the initial offset and auto-commit, InitialOffset
// and CommitInterval decide (the group reads from the start and commits on
// the interval while running).
func TestOwnedConfigFieldsOverridden(t *testing.T) {
	const parts = 2
	group := "g-owned"
	c := newCluster(t, parts)
	ends := produce(t, c, parts, 0, 100)
	opts := sourceOptions(c, group)
	opts.Config.Consumer.Offsets.Initial = sarama.OffsetNewest
	opts.Config.Consumer.Offsets.AutoCommit.Enable = false
	opts.Config.Consumer.Offsets.AutoCommit.Interval = time.Hour
	l := newLedger()
	p := startPipeline(t, pipelineOpts("owned", newSource(t, opts), 1, l, nil))
	defer stopPipeline(t, p)
	wait.Within(t, 20*time.Second, "every record from the earliest offset", func() bool { return l.covers(ends) })
	// Still running: only the interval commits.
	wait.Within(t, 10*time.Second, "interval commits at the end", func() bool { return equalOffsets(committed(c, group), ends) })
}

// Guarantee: option rules the tags express are enforced: durations must be
// positive, the strategy must be known and no topic may be empty.
func TestOptionRules(t *testing.T) {
	_, err := kafka.New(kafka.Options{Brokers: []string{"127.0.0.1:9092"}, GroupID: "g", Topics: []string{""},
		CommitInterval: -time.Second, RedeliveryBackoff: -time.Second, RevokeTimeout: -time.Second,
		Rebalance: "bogus", Config: testConfig()})
	var es validate.Errors
	if err == nil || !errors.As(err, &es) {
		t.Fatalf("invalid options accepted or not reported as validate.Errors: %v", err)
	}
	for _, want := range []struct{ field, rule string }{
		{"kafka.topics[0]", "required"},
		{"kafka.commitInterval", "gte"},
		{"kafka.redeliveryBackoff", "gte"},
		{"kafka.revokeTimeout", "gt"},
		{"kafka.rebalance", "oneof"},
	} {
		if !es.Has(want.field, want.rule) {
			t.Errorf("no %s/%s error in %v", want.field, want.rule, err)
		}
	}
}

// Guarantee: Options.Validate reports, on options with their defaults, the
// same broken rules New does, naming each field.
func TestOptionsValidate(t *testing.T) {
	if err := (kafka.Options{Brokers: []string{"127.0.0.1:9092"}, GroupID: "g", Topics: []string{"t"}}).WithDefaults().Validate(); err != nil {
		t.Fatalf("valid options rejected: %v", err)
	}
	err := kafka.Options{}.WithDefaults().Validate()
	var es validate.Errors
	if !errors.As(err, &es) || !es.Has("kafka.brokers", "required") || !es.Has("kafka.groupID", "required") {
		t.Fatalf("Validate() = %v, want kafka.brokers and kafka.groupID required", err)
	}
}

// Guarantee: a Config whose Consumer.Offsets.Initial is sarama.OffsetOldest
// (as a sarama consumer of the group carried over would have it) is refused
// unless InitialOffset is OffsetEarliest, naming the field and what to set,
// rather than the source silently starting a partition without a committed
// offset at the newest record, past the records the config said to read.
func TestConfigStartingAtTheOldestRecordNeedsInitialOffsetEarliest(t *testing.T) {
	cfg := sarama.NewConfig()
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	for _, initial := range []string{"", kafka.OffsetLatest, kafka.OffsetTimestamp} {
		o := kafka.Options{Brokers: []string{"127.0.0.1:9092"}, GroupID: "g", Topics: []string{"t"},
			InitialOffset: initial, Config: cfg}
		if initial == kafka.OffsetTimestamp {
			o.StartTime = time.Unix(1, 0)
		}
		_, err := kafka.New(o)
		var es validate.Errors
		if !errors.As(err, &es) || !es.Has("kafka.config.Consumer.Offsets.Initial", "initialOffset") || len(es) != 1 {
			t.Fatalf("InitialOffset %q: New = %v, want only kafka.config.Consumer.Offsets.Initial/initialOffset", initial, err)
		}
		if want := `set InitialOffset to "earliest"`; !strings.Contains(err.Error(), want) {
			t.Errorf("InitialOffset %q: %q does not say %s", initial, err, want)
		}
	}
	if _, err := kafka.New(kafka.Options{Brokers: []string{"127.0.0.1:9092"}, GroupID: "g", Topics: []string{"t"},
		InitialOffset: kafka.OffsetEarliest, Config: cfg}); err != nil {
		t.Fatalf("InitialOffset earliest with OffsetOldest refused: %v", err)
	}
}

// Guarantee: zero options take the defaults the field comments and
// docs/kafka.md give: new partitions at the log end, resuming at the
// committed offset, commits every 1s, failed messages committed past,
// a 1s redelivery backoff, a 10s revoke and a 5s connect timeout, end
// offsets listed every 5s, sarama.NewConfig() with a 5s dial and a 10s metadata timeout, and a
// permit window of 512 when the pipeline leaves it unset.
func TestOptionsDefaultsAreTheDocumentedOnes(t *testing.T) {
	d := kafka.Options{}.WithDefaults()
	if d.Config == nil {
		t.Fatal("WithDefaults left Config nil, want sarama.NewConfig()")
	}
	cfg := *d.Config
	kafka.SaramaDefaults(&cfg)
	for _, c := range []struct {
		field     string
		got, want any
	}{
		{"InitialOffset", d.InitialOffset, "latest"},
		{"BeginOffset", d.BeginOffset, "committed"},
		{"CommitMode", d.CommitMode, "interval"},
		{"CommitInterval", d.CommitInterval, time.Second},
		{"FailurePolicy", string(d.FailurePolicy), "commit"},
		{"RedeliveryBackoff", d.RedeliveryBackoff, time.Second},
		{"RevokeTimeout", d.RevokeTimeout, 10 * time.Second},
		{"ConnectTimeout", d.ConnectTimeout, 5 * time.Second},
		{"HighWaterInterval", d.HighWaterInterval, 5 * time.Second},
		{"Rebalance", d.Rebalance, ""},
		{"Config.Net.DialTimeout", cfg.Net.DialTimeout, 5 * time.Second},
		{"Config.Metadata.Timeout", cfg.Metadata.Timeout, 10 * time.Second},
		{"DefaultWindow", kafka.DefaultWindow, 512},
	} {
		if c.got != c.want {
			t.Errorf("default %s = %v, want %v", c.field, c.got, c.want)
		}
	}
}
