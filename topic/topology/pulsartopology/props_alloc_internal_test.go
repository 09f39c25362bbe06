package pulsartopology

import (
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: reading the properties of a letter that is not dead (every
// message of the main topic and the holds) allocates nothing; only a dead
// letter's Death is allocated.
func TestReadingALivingLettersPropertiesAllocatesNothing(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 4, 5, 123456789, time.UTC)
	retried := topology.Letter[topologytest.Msg]{Shard: 3, Retries: 2, FirstFailure: at, LastFailure: at.Add(time.Minute), Resume: true}
	p := properties(&retried, "billing")
	var l topology.Letter[topologytest.Msg]
	if n := testing.AllocsPerRun(100, func() {
		l = topology.Letter[topologytest.Msg]{}
		if _, err := readProperties(p, &l); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("%.2f allocations reading a retried letter's properties, want 0", n)
	}
	if l.Retries != 2 || l.Death != nil {
		t.Errorf("read Retries %d, Death %v; want 2 and none", l.Retries, l.Death)
	}

	dead := retried
	dead.Death = &topology.Death{Reason: topology.ReasonMaxRetries, Error: "boom", Topic: "orders", Group: "billing", Retries: 2}
	p = properties(&dead, "billing")
	if n := testing.AllocsPerRun(100, func() {
		l = topology.Letter[topologytest.Msg]{}
		if _, err := readProperties(p, &l); err != nil {
			t.Fatal(err)
		}
	}); n != 1 {
		t.Errorf("%.2f allocations reading a dead letter's properties, want 1 (its Death)", n)
	}
}
