package kafkatopology

import (
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
	"github.com/boulevard-go/boulevard/validate"
)

// build builds tb or fails the test.
func build(t *testing.T, tb *topology.Builder) *topology.Topology {
	t.Helper()
	top, err := tb.Build()
	if err != nil {
		t.Fatal(err)
	}
	return top
}

// topicConfig returns the configuration of topic kname as the cluster
// describes it.
func topicConfig(t *testing.T, b *Backend[msg], kname string) map[string]string {
	t.Helper()
	res, err := b.admin.DescribeConfigs([]*sarama.ConfigResource{{Type: sarama.TopicResource, Name: kname}}, sarama.DescribeConfigsOptions{})
	if err != nil {
		t.Fatalf("describing topic %q: %v", kname, err)
	}
	cfg := map[string]string{}
	for _, r := range res {
		if r.ErrorCode != sarama.ErrNoError {
			t.Fatalf("describing topic %q: %v", kname, r.ErrorCode)
		}
		for _, e := range r.Configs {
			cfg[e.Name] = e.Value
		}
	}
	return cfg
}

// ms is d in milliseconds, as retention.ms reads.
func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// newLoggingBackend starts a backend on c with opts' retention settings,
// logging to the returned records, closed when the test ends.
func newLoggingBackend(t *testing.T, c *kfake.Cluster, opts Options[msg]) (*Backend[msg], *logtest.Records) {
	t.Helper()
	recs := new(logtest.Records)
	opts.Brokers, opts.Config, opts.Codec = c.ListenAddrs(), testbroker.SaramaConfig(), topic.JSONCodec[msg]{}
	opts.RevokeTimeout, opts.Logger = 2*time.Second, slog.New(recs)
	b, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { topologytest.MustClose(t, "the backend", b.Close) })
	return b, recs
}

// Guarantee: the hold topics and the DLQ a Declare creates keep their
// letters past their time: a hold topic keeps each letter its delay plus
// Options.HoldRetentionMargin (7 days by default), whatever the broker's
// default retention, and a DLQ keeps dead letters forever unless
// Options.DLQRetention says otherwise; both delete by time only
// (cleanup.policy delete, retention.bytes -1), never by compaction or
// by size, whatever the broker's log.retention.bytes.
func TestDeclareCreatesTopicsThatKeepLettersPastTheirTime(t *testing.T) {
	for _, tc := range []struct {
		name       string
		opts       Options[msg]
		wantMargin time.Duration
		wantDLQ    string
	}{
		{name: "defaults", wantMargin: 7 * 24 * time.Hour, wantDLQ: "-1"},
		{name: "options", opts: Options[msg]{HoldRetentionMargin: 2 * time.Hour, DLQRetention: 30 * 24 * time.Hour},
			wantMargin: 2 * time.Hour, wantDLQ: ms(30 * 24 * time.Hour)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A broker whose default retention (1h, 1 KiB per partition)
			// is shorter and smaller than the holds need.
			c := testbroker.Kafka(t, kfake.BrokerConfigs(map[string]string{"log.retention.ms": ms(time.Hour), "log.retention.bytes": "1024"}))
			b, _ := newLoggingBackend(t, c, tc.opts)
			top := build(t, topology.New("keep").Hold(5*time.Second).Hold(30*24*time.Hour).DLQ())
			if _, err := b.Declare(t.Context(), top); err != nil {
				t.Fatal(err)
			}
			for _, h := range top.Holds() {
				cfg := topicConfig(t, b, kafkaName(h.Name))
				if got, want := cfg["retention.ms"], ms(h.Delay+tc.wantMargin); got != want {
					t.Errorf("hold topic %q (delay %s) has retention.ms %s, want %s (its delay plus %s)", h.Name, h.Delay, got, want, tc.wantMargin)
				}
				if got := cfg["cleanup.policy"]; got != "delete" {
					t.Errorf("hold topic %q has cleanup.policy %q, want delete", h.Name, got)
				}
				if got := cfg["retention.bytes"]; got != "-1" {
					t.Errorf("hold topic %q has retention.bytes %s, want -1 (no size limit)", h.Name, got)
				}
			}
			dlq, _ := top.DLQ()
			cfg := topicConfig(t, b, kafkaName(dlq))
			if got := cfg["retention.ms"]; got != tc.wantDLQ {
				t.Errorf("DLQ %q has retention.ms %s, want %s", dlq, got, tc.wantDLQ)
			}
			if got := cfg["cleanup.policy"]; got != "delete" {
				t.Errorf("DLQ %q has cleanup.policy %q, want delete", dlq, got)
			}
			if got := cfg["retention.bytes"]; got != "-1" {
				t.Errorf("DLQ %q has retention.bytes %s, want -1 (no size limit)", dlq, got)
			}
		})
	}
}

// Guarantee: Declare refuses an existing hold topic that can delete a
// letter before (or within MinHoldRetentionMargin of) its due time, and an
// existing hold topic or DLQ that compacts (which deletes the older
// letters of a key) or has a size limit (a finite retention.bytes, its
// own or the broker's default, deletes the oldest letters whenever a
// partition fills): its error wraps ErrRetentionTooShort, is a
// RetentionError, and names the topic, the setting and its value (and
// the delay); no releaser starts.
func TestDeclareRefusesAnExistingTopicThatDeletesLettersBeforeTheirTime(t *testing.T) {
	for _, tc := range []struct {
		name    string
		builder *topology.Builder
		topic   string            // the existing topic
		configs map[string]string // its configuration
		setting string            // the setting refused, if not the default one
		want    []string          // what the message names
	}{
		{name: "retention below the delay", builder: topology.New("short").Hold(2 * time.Hour),
			topic: "short-hold-7200s", configs: map[string]string{"retention.ms": ms(time.Hour)},
			want: []string{`"short-hold-7200s"`, "1h0m0s", "2h0m0s"}},
		{name: "retention below the delay plus the margin", builder: topology.New("tight").Hold(2 * time.Hour),
			topic: "tight-hold-7200s", configs: map[string]string{"retention.ms": ms(2*time.Hour + 30*time.Minute)},
			want: []string{`"tight-hold-7200s"`, "2h30m0s", "2h0m0s"}},
		{name: "broker default below the delay", builder: topology.New("week").Hold(8 * 24 * time.Hour),
			topic: "week-hold-691200s", configs: nil,
			want: []string{`"week-hold-691200s"`, "168h0m0s", "192h0m0s"}},
		{name: "compacted hold", builder: topology.New("packed").Hold(time.Second),
			topic: "packed-hold-1s", configs: map[string]string{"cleanup.policy": "compact"},
			want: []string{`"packed-hold-1s"`, "compact"}},
		{name: "compacted DLQ", builder: topology.New("dead").Hold(time.Second).DLQ(),
			topic: "dead-dlq", configs: map[string]string{"cleanup.policy": "compact,delete"},
			want: []string{`"dead-dlq"`, "compact"}},
		{name: "hold with a size limit", builder: topology.New("sized").Hold(time.Second),
			topic: "sized-hold-1s", configs: map[string]string{"retention.ms": "-1", "retention.bytes": "1048576"},
			setting: "retention.bytes", want: []string{`"sized-hold-1s"`, "retention.bytes 1048576", "AcceptRetentionBytes"}},
		{name: "DLQ with a size limit", builder: topology.New("full").Hold(time.Second).DLQ(),
			topic: "full-dlq", configs: map[string]string{"retention.bytes": "0"},
			setting: "retention.bytes", want: []string{`"full-dlq"`, "retention.bytes 0", "AcceptRetentionBytes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testbroker.Kafka(t)
			if err := c.CreateTopic(tc.topic, 1, tc.configs); err != nil {
				t.Fatal(err)
			}
			b, _ := newLoggingBackend(t, c, Options[msg]{})
			_, err := b.Declare(t.Context(), build(t, tc.builder))
			if !errors.Is(err, ErrRetentionTooShort) {
				t.Fatalf("Declare over topic %q with %v: %v, want an error wrapping ErrRetentionTooShort", tc.topic, tc.configs, err)
			}
			var re *RetentionError
			if !errors.As(err, &re) || re.Topic != tc.topic {
				t.Fatalf("Declare: %#v, want a *RetentionError for topic %q", err, tc.topic)
			}
			if tc.setting != "" && re.Setting != tc.setting {
				t.Errorf("RetentionError.Setting %q, want %q", re.Setting, tc.setting)
			}
			if !strings.HasPrefix(err.Error(), "kafkatopology: ") {
				t.Errorf("error %q does not start with \"kafkatopology: \"", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
			b.mu.Lock()
			n := len(b.releasers)
			b.mu.Unlock()
			if n != 0 {
				t.Errorf("a refused Declare started %d releasers", n)
			}
		})
	}
}

// Guarantee: Declare uses an existing hold topic whose retention covers
// its delay plus MinHoldRetentionMargin (the broker's default of 7 days
// for a short hold, or an unlimited one) as it is, and an existing DLQ
// with a finite retention too, with a WARN naming it (dead letters not
// replayed within it are deleted).
func TestDeclareUsesAnExistingTopicThatKeepsLettersPastTheirTime(t *testing.T) {
	c := testbroker.Kafka(t)
	for name, cfg := range map[string]map[string]string{
		"fine-hold-5s":       nil,
		"fine-hold-2592000s": {"retention.ms": "-1"},
		"fine-dlq":           {"retention.ms": ms(24 * time.Hour)},
	} {
		if err := c.CreateTopic(name, 1, cfg); err != nil {
			t.Fatal(err)
		}
	}
	b, recs := newLoggingBackend(t, c, Options[msg]{})
	if _, err := b.Declare(t.Context(), build(t, topology.New("fine").Hold(5*time.Second).Hold(30*24*time.Hour).DLQ())); err != nil {
		t.Fatalf("Declare over hold topics that keep their letters: %v", err)
	}
	if got := topicConfig(t, b, "fine-dlq")["retention.ms"]; got != ms(24*time.Hour) {
		t.Errorf("the existing DLQ's retention.ms became %s, want it left at %s", got, ms(24*time.Hour))
	}
	if n := recs.Count(slog.LevelWarn, msgDLQRetention); n != 1 {
		t.Errorf("%d WARN %q, want 1 for the DLQ kept 24h", n, msgDLQRetention)
	}
}

// Guarantee: with Options.AcceptRetentionBytes, Declare uses an existing
// hold topic and DLQ with a finite retention.bytes as they are (their
// operator sized them); it still refuses one that compacts.
func TestDeclareAcceptsASizeLimitOnlyWhenTheOptionSaysSo(t *testing.T) {
	c := testbroker.Kafka(t)
	for name, cfg := range map[string]map[string]string{
		"sized-hold-5s":  {"retention.bytes": ms(time.Hour)},
		"sized-dlq":      {"retention.bytes": "1073741824", "retention.ms": "-1"},
		"packed-hold-5s": {"retention.bytes": "1073741824", "cleanup.policy": "compact"},
	} {
		if err := c.CreateTopic(name, 1, cfg); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := newLoggingBackend(t, c, Options[msg]{AcceptRetentionBytes: true})
	if _, err := b.Declare(t.Context(), build(t, topology.New("sized").Hold(5*time.Second).DLQ())); err != nil {
		t.Fatalf("Declare over topics with a size limit, accepted by the options: %v", err)
	}
	_, err := b.Declare(t.Context(), build(t, topology.New("packed").Hold(5*time.Second)))
	var re *RetentionError
	if !errors.As(err, &re) || re.Setting != "cleanup.policy" {
		t.Errorf("Declare over a compacted hold topic with a size limit: %v, want a *RetentionError on cleanup.policy", err)
	}
}

// Guarantee: when the cluster refuses to describe the configuration of
// existing topics (not authorized), Declare logs one WARN and goes on: a
// declaration does not fail only because its topics cannot be checked.
func TestDeclareWarnsOnceAndGoesOnWhenTopicConfigsCannotBeDescribed(t *testing.T) {
	c := testbroker.Kafka(t)
	for _, name := range []string{"secret-hold-5s", "secret-hold-10s", "secret-dlq"} {
		if err := c.CreateTopic(name, 1, map[string]string{"retention.ms": ms(time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	testbroker.RefuseDescribeConfigs(c)
	b, recs := newLoggingBackend(t, c, Options[msg]{})
	if _, err := b.Declare(t.Context(), build(t, topology.New("secret").Hold(5*time.Second).Hold(10*time.Second).DLQ())); err != nil {
		t.Fatalf("Declare where topic configs cannot be described: %v", err)
	}
	if n := recs.Count(slog.LevelWarn, msgUnchecked); n != 1 {
		t.Errorf("%d WARN %q, want 1", n, msgUnchecked)
	}
}

// Guarantee: retention options out of their bounds are refused with
// errors naming each field.
func TestRetentionOptionsOutOfBoundsAreRefused(t *testing.T) {
	for _, tc := range []struct {
		opts  Options[msg]
		field string
	}{
		{Options[msg]{HoldRetentionMargin: time.Minute}, "kafkatopology.holdRetentionMargin"},
		{Options[msg]{HoldRetentionMargin: -time.Hour}, "kafkatopology.holdRetentionMargin"},
		{Options[msg]{HoldRetentionMargin: 87601 * time.Hour}, "kafkatopology.holdRetentionMargin"},
		{Options[msg]{DLQRetention: time.Minute}, "kafkatopology.dlqRetention"},
		{Options[msg]{DLQRetention: -1}, "kafkatopology.dlqRetention"},
		{Options[msg]{DLQRetention: 87601 * time.Hour}, "kafkatopology.dlqRetention"},
	} {
		tc.opts.Brokers, tc.opts.Codec = []string{"127.0.0.1:1"}, topic.JSONCodec[msg]{}
		_, err := New(tc.opts)
		var verrs validate.Errors
		if !errors.As(err, &verrs) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("New with margin %s, DLQ retention %s: %v, want an error naming %s",
				tc.opts.HoldRetentionMargin, tc.opts.DLQRetention, err, tc.field)
		}
	}
}

// Guarantee: HoldRetentionMargin and DLQRetention accept 1h and 87600h
// (10 years), their documented bounds, and refuse the value a nanosecond
// past either with an error naming the field and the rule.
func TestRetentionOptionsBoundsAreInclusive(t *testing.T) {
	const longest = 87600 * time.Hour
	margin := func(d time.Duration) Options[msg] { return Options[msg]{HoldRetentionMargin: d} }
	dlq := func(d time.Duration) Options[msg] { return Options[msg]{DLQRetention: d} }
	for _, tc := range []struct {
		field, rule string
		at, past    Options[msg]
	}{
		{"kafkatopology.holdRetentionMargin", "gte", margin(MinHoldRetentionMargin), margin(MinHoldRetentionMargin - 1)},
		{"kafkatopology.holdRetentionMargin", "lte", margin(longest), margin(longest + 1)},
		{"kafkatopology.dlqRetention", "gte", dlq(time.Hour), dlq(time.Hour - 1)},
		{"kafkatopology.dlqRetention", "lte", dlq(longest), dlq(longest + 1)},
	} {
		for _, o := range []*Options[msg]{&tc.at, &tc.past} {
			o.Brokers, o.Codec = []string{"127.0.0.1:1"}, topic.JSONCodec[msg]{}
		}
		if err := tc.at.WithDefaults().Validate(); err != nil {
			t.Errorf("%s at its %s bound refused: %v", tc.field, tc.rule, err)
		}
		var verrs validate.Errors
		if err := tc.past.WithDefaults().Validate(); !errors.As(err, &verrs) || len(verrs) != 1 || !verrs.Has(tc.field, tc.rule) {
			t.Errorf("%s just past its %s bound: Validate = %v, want one %s error on %s", tc.field, tc.rule, err, tc.rule, tc.field)
		}
	}
}

// Guarantee: the hold topics and the DLQ a Declare creates keep their
// letters whatever the broker's log.retention.bytes: however many bytes a
// partition holds, size retention deletes none of its records.
func TestDeclareCreatesTopicsThatABrokerSizeLimitDoesNotEmpty(t *testing.T) {
	c := testbroker.Kafka(t, kfake.BrokerConfigs(map[string]string{"log.retention.bytes": "1"}))
	b, _ := newLoggingBackend(t, c, Options[msg]{})
	top := build(t, topology.New("bytes").Hold(time.Hour).DLQ())
	if _, err := b.Declare(t.Context(), top); err != nil {
		t.Fatal(err)
	}
	dlq, _ := top.DLQ()
	topics := []string{kafkaName(top.Holds()[0].Name), kafkaName(dlq)}
	cfg := testbroker.SaramaConfig()
	cfg.Producer.Return.Successes = true
	client, err := sarama.NewClient(c.ListenAddrs(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	p, err := sarama.NewSyncProducerFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, kt := range topics {
		for i := range 3 {
			if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: kt, Partition: 0, Value: sarama.StringEncoder(strings.Repeat("x", 100*(i+1)))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	c.ApplyRetention()
	for _, kt := range topics {
		oldest, err := client.GetOffset(kt, 0, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		if oldest != 0 {
			t.Errorf("topic %q starts at offset %d after the broker applied its retention.bytes of 1, want 0: letters deleted", kt, oldest)
		}
	}
}
