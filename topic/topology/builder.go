package topology

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/internal/quote"
)

// DefaultRoutingShards is the number of shards a sequenced topology routes
// its keys to unless RoutingShards says otherwise.
const DefaultRoutingShards = 8

// MaxRoutingShards is the largest RoutingShards a topology accepts.
const MaxRoutingShards = 4096

// MaxHold is the longest Hold a topology accepts: a hold is a retry's
// backoff, and every backend must be able to tell when a letter held now
// falls due (a Pulsar deliver-at time past the year 2262 no longer fits
// its clock).
const MaxHold = 365 * 24 * time.Hour

// MaxHolds is the most hold queues a topology accepts: each is a queue
// of its own (a topic on a broker, a goroutine in memory).
const MaxHolds = 64

// SequenceFailure is what a sequenced topology does with the later messages
// of a key once one of its messages is dead-lettered.
type SequenceFailure uint8

const (
	// Skip dead-letters the failed message and carries on with the next
	// message of its key.
	Skip SequenceFailure = iota + 1
	// FailAll dead-letters the failed message and every later message of its
	// key, for the consumer's lifetime, with reason poisoned. The empty key
	// is never poisoned. The poisoning lives in the memory of the consumer
	// that poisoned the key: a restart, or a rebalance that gives the key's
	// partition to another member of the group, lifts it.
	FailAll
)

// String returns "skip" or "fail_all".
func (f SequenceFailure) String() string {
	switch f {
	case Skip:
		return "skip"
	case FailAll:
		return "fail_all"
	}
	return "SequenceFailure(" + strconv.Itoa(int(f)) + ")"
}

// ErrConflict is wrapped by every [*ConflictError].
var ErrConflict = errors.New("topology: conflict")

// ConflictError is one reason a [Builder] could not build its topology.
type ConflictError struct {
	// Topology is the name given to New.
	Topology string
	// Conflict says what is wrong, naming the builder methods involved.
	Conflict string
}

// Error names the topology and the conflict.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("topology %s: %s", quote.Value(e.Topology), e.Conflict)
}

// Unwrap returns ErrConflict.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// BuildError is what [Builder.Build] returns: every conflict it found, in
// the order the checks run. errors.As finds each *ConflictError and
// errors.Is finds ErrConflict.
type BuildError struct {
	// Conflicts are the conflicts found, at least one.
	Conflicts []*ConflictError
}

// Error lists the conflicts on one line, separated by "; ".
func (e *BuildError) Error() string {
	parts := make([]string, len(e.Conflicts))
	for i, c := range e.Conflicts {
		parts[i] = c.Error()
	}
	return strings.Join(parts, "; ")
}

// Unwrap returns the conflicts.
func (e *BuildError) Unwrap() []error {
	out := make([]error, len(e.Conflicts))
	for i, c := range e.Conflicts {
		out[i] = c
	}
	return out
}

// Builder describes the queues of one topic. Start with New, chain the
// methods in any order (except RoutingShards, which must follow Sequenced),
// and finish with Build. A Builder is not safe for concurrent use; every
// method returns the same Builder.
type Builder struct {
	name        string
	group       string
	groupSet    bool
	broadcast   bool
	holds       []time.Duration
	dlq         bool
	dlqName     string
	dlqNamed    bool
	sequenced   SequenceFailure
	seqSet      bool
	shards      int
	shardsSet   bool
	shardsEarly bool
	allowLoss   bool
}

// New starts a topology whose main topic is called name.
func New(name string) *Builder { return &Builder{name: name} }

// ForConsumerGroup declares the topology for a named consumer group: the
// main topic stays shared, and every derived name (hold queues, the DLQ)
// is namespaced by the group, so a second reader of the same topic gets a
// retry and dead-letter chain of its own. Call order does not matter.
func (b *Builder) ForConsumerGroup(group string) *Builder {
	b.group, b.groupSet = group, true
	return b
}

// Broadcast gives every consumer its own ephemeral subscription receiving
// every message, instead of the consumers sharing one queue. It implies
// AllowMessageLoss and conflicts with ForConsumerGroup, DLQ, DLQNamed, Hold
// and Sequenced.
func (b *Builder) Broadcast() *Builder {
	b.broadcast = true
	return b
}

// Hold adds a hold queue where a retried message waits d before it is
// delivered again. Call it once per step of an escalating backoff, shortest
// first, at most MaxHolds times; d must be a whole number of seconds (it
// names the queue), from 1s to MaxHold.
func (b *Builder) Hold(d time.Duration) *Builder {
	b.holds = append(b.holds, d)
	return b
}

// DLQ adds a dead-letter queue named "{name}-dlq" (namespaced by the
// consumer group, if any).
func (b *Builder) DLQ() *Builder {
	b.dlq = true
	return b
}

// DLQNamed adds a dead-letter queue with the given name, used verbatim:
// topologies that name the same DLQ share it. It must not name the
// topology's main topic or one of its hold queues.
func (b *Builder) DLQNamed(name string) *Builder {
	b.dlqName, b.dlqNamed = name, true
	return b
}

// Sequenced makes the topic ordered per key: while a consumer runs,
// messages of one key are handled one at a time in publish order, a
// retried message holding back the later ones of its key until it is
// handled, and f says what happens to the rest of a key when one of its
// messages is dead-lettered: Skip or FailAll (another value, the zero one
// included, is a conflict).
//
// The order does not hold across a stop of the consumer, nor across a
// rebalance that moves a key's partition to another member of the group:
// a retried message still in a hold queue then (and, on the Kafka and
// Pulsar backends, one back from its hold queue whose handling the stop
// interrupted) comes back after the messages of its key that were held
// back behind it, which the next consumer handles at once, and a poisoned
// key is forgotten (see Several consumers and the Limits section of
// docs/topology.md). A handler that must apply a key's messages strictly
// in order across restarts and rebalances checks a sequence number of its
// own.
func (b *Builder) Sequenced(f SequenceFailure) *Builder {
	b.sequenced, b.seqSet = f, true
	return b
}

// RoutingShards sets how many shards a sequenced topic's keys are routed to
// by consistent hashing (default DefaultRoutingShards). It must be called
// after Sequenced.
func (b *Builder) RoutingShards(n int) *Builder {
	b.shards, b.shardsSet = n, true
	if !b.seqSet {
		b.shardsEarly = true
	}
	return b
}

// AllowMessageLoss lifts the rule that a sequenced topology needs a DLQ or
// a hold queue: without them, a message that fails is discarded (with a
// warning) and a retry is delivered again at once.
func (b *Builder) AllowMessageLoss() *Builder {
	b.allowLoss = true
	return b
}

// Build checks the description and returns the topology, or a *BuildError
// naming every conflict.
func (b *Builder) Build() (*Topology, error) {
	var cs []*ConflictError
	bad := func(format string, args ...any) {
		cs = append(cs, &ConflictError{Topology: b.name, Conflict: fmt.Sprintf(format, args...)})
	}
	if err := topic.Name(b.name).Validate(); err != nil {
		bad("New: %v", err)
	}
	if b.groupSet {
		if err := topic.GroupName(b.group).Validate(); err != nil {
			bad("ForConsumerGroup: %v", err)
		}
	}
	if b.broadcast {
		if b.groupSet {
			bad("Broadcast conflicts with ForConsumerGroup: every broadcast consumer has its own subscription")
		}
		if b.dlq {
			bad("Broadcast conflicts with DLQ")
		}
		if b.dlqNamed {
			bad("Broadcast conflicts with DLQNamed")
		}
		if len(b.holds) > 0 {
			bad("Broadcast conflicts with Hold")
		}
		if b.seqSet {
			bad("Broadcast conflicts with Sequenced")
		}
	}
	if b.dlq && b.dlqNamed {
		bad("DLQ conflicts with DLQNamed: a topology has one dead-letter queue")
	}
	if b.dlqNamed {
		if err := topic.Name(b.dlqName).Validate(); err != nil {
			bad("DLQNamed: %v", err)
		}
	}
	if len(b.holds) > MaxHolds {
		bad("Hold called for %d holds: at most %d", len(b.holds), MaxHolds)
	}
	for i, d := range b.holds {
		switch {
		case d < time.Second:
			bad("Hold(%s): a hold must be at least 1s", d)
		case d > MaxHold:
			bad("Hold(%s): a hold must be at most %s", d, MaxHold)
		case d%time.Second != 0:
			bad("Hold(%s): a hold must be a whole number of seconds (it names the queue)", d)
		case i > 0 && d <= b.holds[i-1]:
			bad("Hold(%s) after Hold(%s): holds must be declared shortest first, each longer than the last", d, b.holds[i-1])
		}
	}
	if b.seqSet {
		switch b.sequenced {
		case Skip, FailAll:
		default:
			bad("Sequenced(%s): not Skip or FailAll", b.sequenced)
		}
	}
	if b.seqSet && !b.broadcast && !b.allowLoss && !b.dlq && !b.dlqNamed && len(b.holds) == 0 {
		bad("Sequenced without DLQ, DLQNamed or Hold would lose failed messages; add one, or call AllowMessageLoss")
	}
	if b.shardsSet {
		switch {
		case !b.seqSet:
			bad("RoutingShards without Sequenced")
		case b.shardsEarly:
			bad("RoutingShards before Sequenced: call it after Sequenced")
		}
		if b.shards < 1 || b.shards > MaxRoutingShards {
			bad("RoutingShards(%d): must be 1 to %d", b.shards, MaxRoutingShards)
		}
	}
	t := &Topology{
		name:      b.name,
		group:     b.group,
		broadcast: b.broadcast,
		sequenced: b.sequenced,
		shards:    b.shards,
		allowLoss: b.allowLoss || b.broadcast,
	}
	if t.sequenced != 0 && !b.shardsSet {
		t.shards = DefaultRoutingShards
	}
	base := b.name
	if b.groupSet {
		base = b.name + GroupSeparator + b.group
	}
	for _, d := range b.holds {
		t.holds = append(t.holds, HoldQueue{Name: base + "-hold-" + strconv.FormatInt(int64(d/time.Second), 10) + "s", Delay: d})
	}
	switch {
	case b.dlqNamed:
		t.dlq = b.dlqName
		// A DLQ sharing a queue of the topology would share its
		// messages: every publish dead on arrival, or every dead letter
		// delivered again.
		if t.dlq == t.name {
			bad("DLQNamed(%s) names the main topic: a DLQ must be a queue of its own", quote.Value(t.dlq))
		}
		for _, h := range t.holds {
			if t.dlq == h.Name {
				bad("DLQNamed(%s) names a hold queue: a DLQ must be a queue of its own", quote.Value(t.dlq))
			}
		}
	case b.dlq:
		t.dlq = base + "-dlq"
	}
	for _, n := range t.Names() {
		if len(cs) == 0 && len(n) > topic.MaxNameLen {
			bad("derived name %s is longer than %d bytes", quote.Value(n), topic.MaxNameLen)
		}
	}
	if len(cs) > 0 {
		return nil, &BuildError{Conflicts: cs}
	}
	return t, nil
}

// GroupSeparator joins a topology's name and its consumer group in the
// derived names: "order-settlement.audit-hold-5s".
const GroupSeparator = "."

// HoldQueue is one hold queue of a topology.
type HoldQueue struct {
	// Name is the derived name: "{name}-hold-{seconds}s", namespaced by
	// the consumer group.
	Name string
	// Delay is how long a message waits in it.
	Delay time.Duration
}

// Topology is a built, immutable description of a topic's queues. Its
// methods are safe for concurrent use.
type Topology struct {
	name      string
	group     string
	broadcast bool
	holds     []HoldQueue
	dlq       string
	sequenced SequenceFailure
	shards    int
	allowLoss bool
}

// Name is the main topic's name.
func (t *Topology) Name() string { return t.name }

// Group is the consumer group given to ForConsumerGroup, "" when none.
func (t *Topology) Group() string { return t.group }

// ConsumerGroup is the group the consumers of this topology share on the
// main topic: the ForConsumerGroup name, or the topology's name when there
// is none. A broadcast topology has none ("").
func (t *Topology) ConsumerGroup() string {
	switch {
	case t.broadcast:
		return ""
	case t.group != "":
		return t.group
	}
	return t.name
}

// IsBroadcast reports whether every consumer gets every message.
func (t *Topology) IsBroadcast() bool { return t.broadcast }

// Holds returns the hold queues, shortest first.
func (t *Topology) Holds() []HoldQueue { return append([]HoldQueue(nil), t.holds...) }

// DLQ returns the dead-letter queue's name and whether there is one.
func (t *Topology) DLQ() (string, bool) { return t.dlq, t.dlq != "" }

// Sequenced returns the sequence failure policy and whether the topic is
// sequenced.
func (t *Topology) Sequenced() (SequenceFailure, bool) { return t.sequenced, t.sequenced != 0 }

// RoutingShards is the number of shards of a sequenced topic (0 when it is
// not sequenced).
func (t *Topology) RoutingShards() int { return t.shards }

// AllowsMessageLoss reports whether AllowMessageLoss (or Broadcast) was
// called.
func (t *Topology) AllowsMessageLoss() bool { return t.allowLoss }

// Names returns every name the topology uses: the main topic, the hold
// queues shortest first, then the DLQ if any.
func (t *Topology) Names() []string {
	out := []string{t.name}
	for _, h := range t.holds {
		out = append(out, h.Name)
	}
	if t.dlq != "" {
		out = append(out, t.dlq)
	}
	return out
}

// holdFor returns the index of the hold queue a message that has been
// retried retries times goes to: min(retries, len(holds)-1), and 0 for a
// negative count (a source counts one as 0 before it gets here).
func (t *Topology) holdFor(retries int) int { return max(0, min(retries, len(t.holds)-1)) }

// String describes the topology on one line.
func (t *Topology) String() string { return "topology " + strings.Join(t.Names(), ",") }
