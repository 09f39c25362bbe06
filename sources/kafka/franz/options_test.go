package franz_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/sources/kafka/franz"
	"github.com/boulevard-go/boulevard/validate"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// rcrowley/go-metrics (sarama's metric registry, linked through the
		// kafka package this test compares with) starts one process-wide
		// ticker on first use.
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
	)
}

// Guarantee: invalid options fail New with a validate.Errors naming each
// field under "franz." and its rule, the rules tags cannot express
// included (start time, revoke timeout against the client's rebalance
// timeout, options franz-go rejects).
func TestOptionsValidated(t *testing.T) {
	_, err := franz.New(franz.Options{InitialOffset: "middle", FailurePolicy: "retry-forever", Brokers: []string{"no-port"},
		StartTime: time.Now(), CommitInterval: -time.Second, Rebalance: "bogus"})
	var es validate.Errors
	if !errors.As(err, &es) {
		t.Fatalf("New = %v, want validate.Errors", err)
	}
	for _, want := range []struct{ field, rule string }{
		{"franz.brokers[0]", "hostname_port"},
		{"franz.groupID", "required"},
		{"franz.topics", "required"},
		{"franz.initialOffset", "oneof"},
		{"franz.failurePolicy", "oneof"},
		{"franz.startTime", "excluded_unless"},
		{"franz.commitInterval", "gte"},
		{"franz.rebalance", "oneof"},
	} {
		if !es.Has(want.field, want.rule) {
			t.Errorf("no %s/%s error in %v", want.field, want.rule, err)
		}
	}
	base := franz.Options{Brokers: []string{"127.0.0.1:9092"}, GroupID: "g", Topics: []string{"t"}}
	o := base
	o.RevokeTimeout = 30 * time.Second
	o.ClientOptions = []kgo.Opt{kgo.RebalanceTimeout(20 * time.Second)}
	if _, err := franz.New(o); !errors.As(err, &es) || !es.Has("franz.revokeTimeout", "ltfield") {
		t.Fatalf("revoke timeout above the rebalance timeout: %v", err)
	}
	o = base
	o.ClientOptions = []kgo.Opt{kgo.ClientID(strings.Repeat("x", 300))} // longer than franz-go allows
	if _, err := franz.New(o); !errors.As(err, &es) || !es.Has("franz.clientOptions", "kgo") {
		t.Fatalf("client options franz-go rejects: %v", err)
	}
	if _, err := franz.New(base); err != nil {
		t.Fatalf("valid options rejected: %v", err)
	}
}

// Guarantee: the options never print their client options (which hold TLS
// and SASL credentials), with any verb.
func TestOptionsRedactClientOptions(t *testing.T) {
	o := franz.Options{Brokers: []string{"b:9092"}, GroupID: "g", Topics: []string{"t"},
		ClientOptions: []kgo.Opt{kgo.SASL(plain.Auth{User: "alice", Pass: "s3cret"}.AsMechanism())}}
	for _, verb := range []string{"%v", "%+v", "%s", "%#v"} {
		out := fmt.Sprintf(verb, o)
		if strings.Contains(out, "s3cret") || strings.Contains(out, "alice") || !strings.Contains(out, `GroupID:"g"`) {
			t.Errorf("%s prints %q", verb, out)
		}
	}
}

// Guarantee: the franz-go source shares the sarama source's types and
// errors, so a handler or a caller works with either: a *franz.Metadata is
// a *kafka.Metadata, and errors.Is matches either package's sentinel.
func TestSharedTypesAndErrors(t *testing.T) {
	var md *franz.Metadata = &kafka.Metadata{Topic: "t"}
	var st kafka.Stats = franz.Stats{GroupID: "g"}
	if md.Topic != "t" || st.GroupID != "g" {
		t.Fatal("types differ")
	}
	for _, pair := range [][2]error{{franz.ErrClosed, kafka.ErrClosed}, {franz.ErrConnect, kafka.ErrConnect},
		{franz.ErrUnknownTopic, kafka.ErrUnknownTopic}, {franz.ErrConsume, kafka.ErrConsume},
		{franz.ErrDenied, kafka.ErrDenied}, {franz.ErrStartRefused, kafka.ErrStartRefused},
		{franz.ErrNotCreated, kafka.ErrNotCreated}, {franz.ErrFetchRefused, kafka.ErrFetchRefused},
		{franz.ErrCorruptBatch, kafka.ErrCorruptBatch}, {franz.ErrNilContext, kafka.ErrNilContext}} {
		if !errors.Is(fmt.Errorf("wrapped: %w", pair[0]), pair[1]) {
			t.Errorf("%v does not match %v", pair[0], pair[1])
		}
	}
	if franz.FailureRedeliver != kafka.FailureRedeliver || franz.DefaultWindow != kafka.DefaultWindow {
		t.Error("option values differ")
	}
}

// Guarantee: options at their bounds fail New of either source with a
// validate.Errors naming the field, never a panic or a lookup Kafka reads
// otherwise: a nil client option, a start time before the Unix epoch
// (Kafka reads -1ms as the end of the partition, -2ms as its start), and a
// LookupTimeout below 0 or above 5m; a LookupTimeout left 0 is 10s.
func TestOptionsAtTheirBoundsValidated(t *testing.T) {
	base := franz.Options{Brokers: []string{"127.0.0.1:9092"}, GroupID: "g", Topics: []string{"t"}}
	var es validate.Errors
	o := base
	o.ClientOptions = []kgo.Opt{kgo.ClientID("c"), nil}
	if _, err := franz.New(o); !errors.As(err, &es) || !es.Has("franz.clientOptions[1]", "required") {
		t.Errorf("nil client option: New = %v, want franz.clientOptions[1] required", err)
	}
	for _, lt := range []time.Duration{-time.Second, 5*time.Minute + 1} {
		o = base
		o.LookupTimeout = lt
		if _, err := franz.New(o); !errors.As(err, &es) || !es.Has("franz.lookupTimeout", map[bool]string{true: "gt", false: "lte"}[lt < 0]) {
			t.Errorf("LookupTimeout %s: New = %v, want a franz.lookupTimeout error", lt, err)
		}
	}
	o = base
	o.LookupTimeout = 5 * time.Minute
	if _, err := franz.New(o); err != nil {
		t.Errorf("LookupTimeout 5m rejected: %v", err)
	}
	if got := base.WithDefaults().LookupTimeout; got != 10*time.Second {
		t.Errorf("default LookupTimeout %s, want the documented 10s, as the sarama source's Metadata.Timeout", got)
	}
	for _, start := range []time.Time{time.UnixMilli(-1), time.UnixMilli(-2), time.Date(1, 1, 1, 0, 0, 1, 0, time.UTC)} {
		o = base
		o.InitialOffset, o.StartTime = franz.OffsetTimestamp, start
		if _, err := franz.New(o); !errors.As(err, &es) || !es.Has("franz.startTime", "min") {
			t.Errorf("StartTime %s: franz.New = %v, want franz.startTime min", start, err)
		}
		ko := kafka.Options{Brokers: base.Brokers, GroupID: "g", Topics: base.Topics, InitialOffset: kafka.OffsetTimestamp, StartTime: start}
		if _, err := kafka.New(ko); !errors.As(err, &es) || !es.Has("kafka.startTime", "min") {
			t.Errorf("StartTime %s: kafka.New = %v, want kafka.startTime min", start, err)
		}
	}
	o = base
	o.InitialOffset, o.StartTime = franz.OffsetTimestamp, time.UnixMilli(0)
	if _, err := franz.New(o); err != nil {
		t.Errorf("StartTime at the Unix epoch rejected: %v", err)
	}
	// A commit or redelivery timer shorter than a millisecond would fire
	// without pause: refused by both sources, a millisecond accepted.
	for _, d := range []time.Duration{-time.Second, time.Microsecond, time.Millisecond} {
		o = base
		o.CommitInterval, o.RedeliveryBackoff = d, d
		ko := kafka.Options{Brokers: base.Brokers, GroupID: "g", Topics: base.Topics, CommitInterval: d, RedeliveryBackoff: d}
		_, ferr := franz.New(o)
		_, kerr := kafka.New(ko)
		for _, c := range []struct {
			err    error
			prefix string
		}{{ferr, "franz"}, {kerr, "kafka"}} {
			if d >= time.Millisecond {
				if c.err != nil {
					t.Errorf("%s: CommitInterval and RedeliveryBackoff of %s rejected: %v", c.prefix, d, c.err)
				}
				continue
			}
			if !errors.As(c.err, &es) || !es.Has(c.prefix+".commitInterval", "gte") || !es.Has(c.prefix+".redeliveryBackoff", "gte") {
				t.Errorf("%s: CommitInterval and RedeliveryBackoff of %s: New = %v, want gte errors on both", c.prefix, d, c.err)
			}
		}
	}
}

// Guarantee: the sources' intervals and connect timeout are accepted up
// to their documented bounds (1 hour; 5 minutes for ConnectTimeout) and
// refused past them, each error naming the field and the rule, in both
// clients. (RevokeTimeout is bounded by the group's rebalance timeout.)
func TestDurationsAreBoundedInBothClients(t *testing.T) {
	for _, f := range []struct {
		field string
		set   func(*franz.Options, *kafka.Options, time.Duration)
		max   time.Duration
	}{
		{"commitInterval", func(o *franz.Options, k *kafka.Options, d time.Duration) { o.CommitInterval, k.CommitInterval = d, d }, time.Hour},
		{"redeliveryBackoff", func(o *franz.Options, k *kafka.Options, d time.Duration) {
			o.RedeliveryBackoff, k.RedeliveryBackoff = d, d
		}, time.Hour},
		{"connectTimeout", func(o *franz.Options, k *kafka.Options, d time.Duration) { o.ConnectTimeout, k.ConnectTimeout = d, d }, 5 * time.Minute},
		{"highWaterInterval", func(o *franz.Options, k *kafka.Options, d time.Duration) {
			o.HighWaterInterval, k.HighWaterInterval = d, d
		}, time.Hour},
	} {
		for _, d := range []time.Duration{f.max, f.max + time.Millisecond} {
			o := franz.Options{Brokers: []string{"127.0.0.1:9092"}, GroupID: "g", Topics: []string{"t"}}
			k := kafka.Options{Brokers: o.Brokers, GroupID: "g", Topics: o.Topics}
			f.set(&o, &k, d)
			for _, c := range []struct {
				prefix string
				err    error
			}{{"franz", o.WithDefaults().Validate()}, {"kafka", k.WithDefaults().Validate()}} {
				var es validate.Errors
				switch {
				case d == f.max && c.err != nil:
					t.Errorf("%s.%s of %s, its bound, rejected: %v", c.prefix, f.field, d, c.err)
				case d > f.max && (!errors.As(c.err, &es) || !es.Has(c.prefix+"."+f.field, "lte")):
					t.Errorf("%s.%s of %s: Validate = %v, want an lte error on %s.%s", c.prefix, f.field, d, c.err, c.prefix, f.field)
				}
			}
		}
	}
}

// Guarantee: a HighWaterInterval below 10ms is refused, naming the field
// and the rule, in both clients: each interval sends the cluster one
// ListOffsets request per broker.
func TestHighWaterIntervalBelow10msRefusedInBothClients(t *testing.T) {
	for _, d := range []time.Duration{10 * time.Millisecond, 10*time.Millisecond - 1} {
		o := franz.Options{Brokers: []string{"127.0.0.1:9092"}, GroupID: "g", Topics: []string{"t"}, HighWaterInterval: d}
		k := kafka.Options{Brokers: o.Brokers, GroupID: "g", Topics: o.Topics, HighWaterInterval: d}
		for _, c := range []struct {
			prefix string
			err    error
		}{{"franz", o.WithDefaults().Validate()}, {"kafka", k.WithDefaults().Validate()}} {
			var es validate.Errors
			refused := errors.As(c.err, &es) && es.Has(c.prefix+".highWaterInterval", "gte")
			if refused != (d < 10*time.Millisecond) {
				t.Errorf("%s.highWaterInterval of %s: Validate = %v", c.prefix, d, c.err)
			}
		}
	}
}

// Guarantee: ClientOptions that set what the source owns and would replace
// or read otherwise (a consumer group, topics, topics as regular
// expressions) fail New with an error naming the option and the field to
// set instead, rather than being ignored.
func TestClientOptionsTheSourceOwnsAreRefused(t *testing.T) {
	base := franz.Options{Brokers: []string{"127.0.0.1:9092"}, GroupID: "g", Topics: []string{"t"}}
	for _, tc := range []struct {
		opt  kgo.Opt
		want string
	}{
		{kgo.ConsumerGroup("other"), "kgo.ConsumerGroup: the source sets it from GroupID"},
		{kgo.ConsumeTopics("other"), "kgo.ConsumeTopics: the source sets it from Topics"},
		{kgo.ConsumeRegex(), "kgo.ConsumeRegex"},
	} {
		o := base
		o.ClientOptions = []kgo.Opt{kgo.ClientID("c"), tc.opt}
		var es validate.Errors
		_, err := franz.New(o)
		if !errors.As(err, &es) || !es.Has("franz.clientOptions", "owned") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New with %s in ClientOptions = %v, want franz.clientOptions owned, saying %q", tc.want, err, tc.want)
		}
	}
}

// Guarantee: a broker given with user information, with or without a
// port ("user:password@host", "kafka://user:password@host:9092"), fails
// validation with an error that names the field and never shows the
// password.
func TestABrokerWithUserInformationFailsWithoutShowingThePassword(t *testing.T) {
	const secret = "s3cr3t-XYZ"
	for _, b := range []string{"user:" + secret + "@broker", "kafka://user:" + secret + "@broker:9092", "user:" + secret + "@broker:9092", "broker:" + secret} {
		_, err := franz.New(franz.Options{Brokers: []string{b}, GroupID: "g", Topics: []string{"t"}})
		var es validate.Errors
		if !errors.As(err, &es) || !es.Has("franz.brokers[0]", "hostname_port") {
			t.Errorf("broker %q: New = %v, want franz.brokers[0] hostname_port", b, err)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("broker %q: the error shows the password: %v", b, err)
		}
	}
}
