package lettersize

import (
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: TimeBytes holds the longest time a letter's history writes:
// RFC 3339 with nanoseconds and a zone offset, in the year 9999.
func TestTimeBytesHoldsTheLongestTime(t *testing.T) {
	longest := time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.FixedZone("", -(23*3600+59*60)))
	if s := longest.Format(time.RFC3339Nano); len(s) != TimeBytes {
		t.Fatalf("TimeBytes = %d, want %d (%q)", TimeBytes, len(s), s)
	}
}

// Guarantee: Reserve counts every entry a hold and a dead-lettering write,
// each once under its own key, at its largest value: the shard and the
// retry counts at their bounds, the times at TimeBytes, the consumer
// group for both group entries, the longest Reason, a failure text at
// MaxDeathErrorBytes and the topology's name; the reserve is the sum of
// what entry says of each.
func TestReserveCountsEachEntryAtItsLargest(t *testing.T) {
	top, err := topology.New("orders").ForConsumerGroup("billing-service").Hold(time.Minute).DLQ().Build()
	if err != nil {
		t.Fatal(err)
	}
	k := Keys{Shard: "shard", Retries: "retries", FirstFailure: "first", LastFailure: "last", Resume: "resume",
		Group: "group", DeathReason: "d-reason", DeathError: "d-error", DeathTopic: "d-topic", DeathGroup: "d-group",
		DeathRetries: "d-retries", DeathFirstFailure: "d-first", DeathLastFailure: "d-last", ResumeValue: "true"}
	retries := len(strconv.Itoa(topology.MaxRetriesLimit))
	want := map[string]int{
		"shard": len(strconv.Itoa(topology.MaxRoutingShards - 1)), "retries": retries,
		"first": TimeBytes, "last": TimeBytes, "resume": len("true"), "group": len("billing-service"),
		"d-reason": len(topology.ReasonMaxRetries), // the longest Reason
		"d-error":  topology.MaxDeathErrorBytes, "d-topic": len("orders"), "d-group": len("billing-service"),
		"d-retries": retries, "d-first": TimeBytes, "d-last": TimeBytes,
	}
	got := map[string]int{}
	sum := 0
	reserve := Reserve(k, top, func(key string, n int) int {
		if _, again := got[key]; again {
			t.Errorf("entry %q counted twice", key)
		}
		got[key] = n
		sum += len(key) + n
		return len(key) + n
	})
	if !maps.Equal(got, want) {
		t.Errorf("Reserve counted entries %v, want %v", got, want)
	}
	if reserve != sum {
		t.Errorf("Reserve = %d, want %d, the sum of its entries", reserve, sum)
	}
}
