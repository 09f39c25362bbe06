package kafkatopology

import (
	"context"
	"fmt"
	"reflect"
	"sync"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/kafkaconn"
	"github.com/boulevard-go/boulevard/internal/liveset"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// dialing holds the connection sets through which the clients of one call
// bounded by a context (Declare, Subscribe) dial, each a set of its own
// within the backend's. sarama's requests take no context: a client's
// first metadata request, an admin request or a join waits for the
// broker's answer up to Net.ReadTimeout, with retries. When the call's
// context ends before the call is done, its sets are cut (cutShort), so
// that what it still waits for fails at once and it ends soon after. Once
// the call is done (settle), the sets of the clients that outlive it (a
// reader's, a releaser's) are theirs, and the call no longer cuts them.
// A call through the backend's shared client alone (offsets) makes no set:
// cutting it short cuts nothing, and its request ends within sarama's
// timeouts or when the backend's Close cuts the backend's set.
type dialing struct {
	parent *kafkaconn.Set // the backend's

	mu   sync.Mutex
	cut  bool // cut short: every set is cut, and a new one is cut at once
	done bool // settled: no set is cut by the call any more
	sets []*kafkaconn.Set
}

// errCutShort is what a call cut short returns for what it was making;
// the caller has returned an error wrapping its context's by then.
var errCutShort = fmt.Errorf("%w: %w", ErrConnect, kafkaconn.ErrCut)

// child returns a copy of cfg that dials through a new set within the
// backend's, and that set, which is cut at once if the call was cut short
// already.
func (d *dialing) child(cfg *sarama.Config) (*sarama.Config, *kafkaconn.Set) {
	c, s := d.parent.Child(cfg)
	ownStrategies(c)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cut {
		s.Cut()
	} else if !d.done {
		d.sets = append(d.sets, s)
	}
	return c, s
}

// settle marks the call done, so that it cuts none of its sets from then
// on. It reports false when the call was cut short first: the call then
// releases what it made, and fails.
func (d *dialing) settle() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cut {
		return false
	}
	d.done, d.sets = true, nil
	return true
}

// cutShort cuts the call's sets unless the call has settled (it then
// reports false: what the call made stands).
func (d *dialing) cutShort() bool {
	d.mu.Lock()
	if d.done {
		d.mu.Unlock()
		return false
	}
	d.cut = true
	sets := d.sets
	d.sets = nil
	d.mu.Unlock()
	for _, s := range sets {
		s.Cut()
	}
	return true
}

// bounded runs call on a goroutine of the backend (its Close waits for
// it) and waits for it within ctx. When ctx ends before call has settled,
// bounded cuts call's connections and returns an error wrapping kind and
// ctx.Err() that names what was under way (what); call then fails at once,
// releases what it had made and ends soon after. Once the backend is
// closed it returns topology.ErrClosed.
func bounded[T, R any](ctx context.Context, b *Backend[T], kind error, what string, call func(*dialing) (R, error)) (R, error) {
	var zero R
	if err := ctx.Err(); err != nil {
		return zero, fmt.Errorf("%w: %s: %w", kind, what, err)
	}
	if !liveset.Enter(&b.mu, &b.closed, &b.calls) {
		return zero, topology.ErrClosed
	}
	d := &dialing{parent: b.conns}
	var (
		res R
		err error
	)
	done := make(chan struct{})
	go func() {
		defer b.calls.Done()
		defer close(done)
		res, err = call(d)
	}()
	if werr := liveset.Await(ctx, done, nil); werr != nil && d.cutShort() {
		return zero, fmt.Errorf("%w: %s: %w", kind, what, werr)
	}
	<-done
	return res, err
}

// ownStrategy makes, for each type of sarama's partition assignment
// strategies that keep what they planned last in the strategy itself
// (sticky, cooperative-sticky), a new one: a group leader's plan writes
// that state, so two consumer groups planning at once through one of
// them race.
var ownStrategy = map[reflect.Type]func() sarama.BalanceStrategy{
	reflect.TypeOf(sarama.NewBalanceStrategySticky()):            sarama.NewBalanceStrategySticky,
	reflect.TypeOf(sarama.NewBalanceStrategyCooperativeSticky()): sarama.NewBalanceStrategyCooperativeSticky,
}

// ownStrategies gives cfg, a client's copy of the backend's config, an
// instance of its own of each stateful strategy the backend's config
// names (see ownStrategy): the backend's consumer groups (its readers'
// and its hold queues' releasers) share that config, and their leaders
// plan their rebalances each on its own goroutine.
func ownStrategies(cfg *sarama.Config) {
	own := func(s sarama.BalanceStrategy) sarama.BalanceStrategy {
		if mk, ok := ownStrategy[reflect.TypeOf(s)]; ok {
			return mk()
		}
		return s
	}
	rb := &cfg.Consumer.Group.Rebalance
	if ss := rb.GroupStrategies; len(ss) > 0 {
		rb.GroupStrategies = make([]sarama.BalanceStrategy, len(ss))
		for i, s := range ss {
			rb.GroupStrategies[i] = own(s)
		}
	}
	if rb.Strategy != nil {
		rb.Strategy = own(rb.Strategy)
	}
}
