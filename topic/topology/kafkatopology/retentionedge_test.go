package kafkatopology

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: Declare uses an existing hold topic that keeps its letters
// exactly their delay plus MinHoldRetentionMargin: the margin is the
// least it asks for, not less than it refuses.
func TestDeclareUsesAHoldTopicKeepingLettersExactlyTheirDelayPlusTheMargin(t *testing.T) {
	c := testbroker.Kafka(t)
	if err := c.CreateTopic("edge-hold-7200s", 1, map[string]string{"retention.ms": ms(2*time.Hour + MinHoldRetentionMargin)}); err != nil {
		t.Fatal(err)
	}
	b, _ := newLoggingBackend(t, c, Options[msg]{})
	if _, err := b.Declare(t.Context(), build(t, topology.New("edge").Hold(2*time.Hour))); err != nil {
		t.Fatalf("Declare over a hold topic of 2h keeping records 2h plus %s: %v", MinHoldRetentionMargin, err)
	}
}

// Guarantee: Declare warns of an existing DLQ only when it keeps dead
// letters for less than Options.DLQRetention: one that keeps them exactly
// that long is used without a WARN, one that keeps them less with one.
func TestDeclareWarnsOfAnExistingDLQOnlyWhenItKeepsLessThanTheOptionSays(t *testing.T) {
	for _, tc := range []struct {
		dlqRetention time.Duration
		warns        int
	}{
		{24 * time.Hour, 0},
		{48 * time.Hour, 1},
	} {
		c := testbroker.Kafka(t)
		if err := c.CreateTopic("kept-dlq", 1, map[string]string{"retention.ms": ms(24 * time.Hour)}); err != nil {
			t.Fatal(err)
		}
		b, recs := newLoggingBackend(t, c, Options[msg]{DLQRetention: tc.dlqRetention})
		if _, err := b.Declare(t.Context(), build(t, topology.New("kept").DLQ())); err != nil {
			t.Fatalf("Declare over a DLQ keeping dead letters 24h: %v", err)
		}
		if n := recs.Count(slog.LevelWarn, msgDLQRetention); n != tc.warns {
			t.Errorf("a DLQ keeping dead letters 24h under DLQRetention %s: %d WARN %q, want %d", tc.dlqRetention, n, msgDLQRetention, tc.warns)
		}
	}
}

// Guarantee: a cleanup.policy that lists compact among other policies,
// with spaces around the commas as Kafka allows, counts as compacting.
func TestACleanupPolicyListingCompactWithSpacesCompacts(t *testing.T) {
	for _, policy := range []string{"compact", "delete,compact", "delete, compact", " compact , delete"} {
		if !compacts(policy) {
			t.Errorf("cleanup.policy %q does not count as compacting", policy)
		}
	}
	for _, policy := range []string{"delete", "", "compaction"} {
		if compacts(policy) {
			t.Errorf("cleanup.policy %q counts as compacting", policy)
		}
	}
}

// Guarantee: a topic whose description has no retention.bytes (a cluster
// too old to describe it) counts as keeping records without a size
// limit, Kafka's default, and so is not refused for its size.
func TestATopicDescribedWithoutRetentionBytesHasNoSizeLimit(t *testing.T) {
	tc, err := topicRetention(&sarama.ConfigResourceResult{Type: sarama.TopicResource, Name: "old-dlq",
		Configs: []sarama.ConfigEntry{{Name: cfgRetention, Value: "-1"}, {Name: cfgCleanup, Value: "delete"}}})
	if err != nil {
		t.Fatalf("a description with retention.ms and no retention.bytes: %v", err)
	}
	if tc.bytes >= 0 {
		t.Errorf("a description without retention.bytes reads as retention.bytes %d, want unlimited (negative)", tc.bytes)
	}
}

// Guarantee: when several existing hold topics would delete letters
// before their time, Declare's RetentionError names the first of them in
// the topology's order.
func TestDeclareRefusesNamingTheFirstTopicThatDeletesLettersEarly(t *testing.T) {
	c := testbroker.Kafka(t)
	for _, name := range []string{"two-hold-3600s", "two-hold-7200s"} {
		if err := c.CreateTopic(name, 1, map[string]string{"retention.ms": ms(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := newLoggingBackend(t, c, Options[msg]{})
	_, err := b.Declare(t.Context(), build(t, topology.New("two").Hold(time.Hour).Hold(2*time.Hour)))
	var re *RetentionError
	if !errors.As(err, &re) || re.Topic != "two-hold-3600s" {
		t.Fatalf("Declare over two hold topics keeping records 1h: %v, want a *RetentionError for the first, two-hold-3600s", err)
	}
}
