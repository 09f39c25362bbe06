package topology_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/validate"
)

// Guarantee: ShardOf is stable, stays in range, spreads keys, and is
// consistent: one more shard moves only about 1/(n+1) of the keys, each to
// the new shard.
func TestShardOf(t *testing.T) {
	const keys = 20000
	counts := make([]int, 8)
	moved := 0
	for i := range keys {
		k := "account-" + strconv.Itoa(i)
		s8 := topology.ShardOf(k, 8)
		if s8 != topology.ShardOf(k, 8) || s8 < 0 || s8 >= 8 {
			t.Fatalf("ShardOf(%q, 8) = %d", k, s8)
		}
		counts[s8]++
		if s9 := topology.ShardOf(k, 9); s9 != s8 {
			moved++
			if s9 != 8 {
				t.Fatalf("key %q moved from %d to %d, not to the new shard", k, s8, s9)
			}
		}
	}
	for i, c := range counts {
		if c < keys/8*8/10 || c > keys/8*12/10 {
			t.Errorf("shard %d has %d of %d keys", i, c, keys)
		}
	}
	if moved < keys/9*8/10 || moved > keys/9*12/10 {
		t.Errorf("%d of %d keys moved going from 8 to 9 shards, want about %d", moved, keys, keys/9)
	}
	if topology.ShardOf("x", 1) != 0 || topology.ShardOf("x", 0) != 0 {
		t.Error("one shard (or fewer) is shard 0")
	}
}

// sequencedAndPlain declares, in memory, a sequenced topology "s" and a
// plain one "p".
func sequencedAndPlain(t *testing.T) (sq, pq topology.Queues[int]) {
	t.Helper()
	m, _ := topology.NewMemory[int](topology.MemoryOptions{})
	t.Cleanup(func() { _ = m.Close(t.Context()) }) // in memory, Close never waits
	seq, _ := topology.New("s").Sequenced(topology.Skip).DLQ().Build()
	plain, _ := topology.New("p").Build()
	sq, _ = m.Declare(t.Context(), seq)
	pq, _ = m.Declare(t.Context(), plain)
	return sq, pq
}

// Guarantee: a sequenced topology's publisher needs a key function, and
// no other publisher takes one.
func TestPublisherKey(t *testing.T) {
	sq, pq := sequencedAndPlain(t)
	key := func(int) string { return "k" }
	if _, err := topology.NewPublisher(sq, topology.PublisherOptions[int]{}); !errors.Is(err, topology.ErrKey) {
		t.Errorf("sequenced without key: %v", err)
	}
	if _, err := topology.NewPublisher(pq, topology.PublisherOptions[int]{Key: key}); !errors.Is(err, topology.ErrKey) {
		t.Errorf("plain with key: %v", err)
	}
	if _, err := topology.NewPublisher(sq, topology.PublisherOptions[int]{Key: key}); err != nil {
		t.Errorf("sequenced with key: %v", err)
	}
}

// Guarantee: a publisher's key that does not fit its topology is an error
// naming the topology and what to change.
func TestPublisherKeyErrorSaysWhichTopologyAndWhatToChange(t *testing.T) {
	sq, pq := sequencedAndPlain(t)
	_, err := topology.NewPublisher(sq, topology.PublisherOptions[int]{})
	if want := `topology "s" is sequenced and PublisherOptions.Key is nil; set it to a function that returns each message's sequence key`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("sequenced without key: %v, want it to say %q", err, want)
	}
	_, err = topology.NewPublisher(pq, topology.PublisherOptions[int]{Key: func(int) string { return "k" }})
	if want := `topology "p" is not sequenced and PublisherOptions.Key is set; leave it nil, or build the topology with Sequenced`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("plain with key: %v, want it to say %q", err, want)
	}
}

// Guarantee: invalid options are errors naming the field and the rule.
func TestOptionsValidation(t *testing.T) {
	_, err := topology.NewMemory[int](topology.MemoryOptions{Capacity: -1})
	var errs validate.Errors
	if !errors.As(err, &errs) || !errs.Has("memory.capacity", "gte") {
		t.Errorf("NewMemory: %v", err)
	}
	_, err = topology.NewMemory[int](topology.MemoryOptions{Capacity: topology.MaxMemoryCapacity + 1})
	if !errors.As(err, &errs) || !errs.Has("memory.capacity", "lte") {
		t.Errorf("NewMemory one past MaxMemoryCapacity: %v", err)
	}
	_, err = topology.NewSource(topology.SourceOptions[int]{MaxRetries: -2, MaxBatch: -1})
	if !errors.As(err, &errs) || !errs.Has("topology.queues", "required") || !errs.Has("topology.maxRetries", "gte") || !errs.Has("topology.maxBatch", "gte") {
		t.Errorf("NewSource: %v", err)
	}
	m, _ := topology.NewMemory[int](topology.MemoryOptions{})
	defer m.Close(t.Context())
	top, _ := topology.New("nodlq").Build()
	q, _ := m.Declare(t.Context(), top)
	if _, err := topology.NewDeadSource(topology.SourceOptions[int]{Queues: q}); !errors.Is(err, topology.ErrNoDLQ) {
		t.Errorf("NewDeadSource without DLQ: %v", err)
	}
}

// Guarantee: a letter survives a JSON round trip (how a networked backend
// may carry it) with everything but its receipt.
func TestLetterJSON(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	l := topology.Letter[string]{Value: "v", Key: "k", Shard: 3, Retries: 2, FirstFailure: now, LastFailure: now.Add(time.Second),
		Death:   &topology.Death{Reason: topology.ReasonPoisoned, Error: "e", Topic: "t", Group: "g", Retries: 2, FirstFailure: now, LastFailure: now},
		Receipt: 42, Resume: true}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	var back topology.Letter[string]
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	l.Receipt = nil
	if !reflect.DeepEqual(back, l) {
		t.Errorf("round trip %+v, want %+v", back, l)
	}
}

// Guarantee: NewPublisher and Replay given no queues return a
// validate.ErrInvalid error naming the argument and its rule, never a
// panic.
func TestNilQueuesAreRefused(t *testing.T) {
	call := func(f func() error) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		return f()
	}
	for name, f := range map[string]func() error{
		"NewPublisher": func() error {
			_, err := topology.NewPublisher[int](nil, topology.PublisherOptions[int]{})
			return err
		},
		"Replay": func() error {
			_, err := topology.Replay[int](t.Context(), nil, topology.ReplayOptions[int]{})
			return err
		},
	} {
		err := call(f)
		var fe *validate.FieldError
		if !errors.As(err, &fe) || fe.Rule != "required" || !strings.HasSuffix(fe.Field, ".queues") {
			t.Errorf("%s(nil queues) = %v, want a validate.FieldError: <...>.queues is required", name, err)
		}
	}
}
