package topic_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/validate"
)

// WithDefaults fills every zero field with its documented default and keeps
// the fields that are set.
func TestOptionsWithDefaults(t *testing.T) {
	o := topic.Options{}.WithDefaults()
	if o.Mode != topic.BalancedOnly || o.Balanced.Capacity != 1024 || o.Balanced.OnFull != topic.Block ||
		o.Broadcast.Capacity != 4096 || o.Broadcast.OnLag != topic.DropOldest || o.Broadcast.AckMode != topic.AckFirst ||
		o.AckPropagation.Mode != topic.PropagationDisabled || o.AckPropagation.MaxInFlight != 1024 ||
		o.AckPropagation.Timeout != 30*time.Second {
		t.Fatalf("defaults = %+v", o)
	}
	set := topic.Options{Balanced: topic.BalancedPolicy{Capacity: 7}, AckPropagation: topic.AckPropagation{Timeout: time.Second}}.WithDefaults()
	if set.Balanced.Capacity != 7 || set.AckPropagation.Timeout != time.Second {
		t.Fatalf("set values overwritten: %+v", set)
	}
	if err := o.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
}

// Validate names the field (with YAML names) and the rule of every broken
// option, and ValidateAs roots the paths at a prefix.
func TestOptionsValidate(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*topic.Options)
		want   string
	}{
		{"balanced capacity", func(o *topic.Options) { o.Balanced.Capacity = -1 }, "balanced.queue_capacity must be ≥ 1"},
		{"broadcast capacity", func(o *topic.Options) { o.Broadcast.Capacity = -3 }, "broadcast.queue_capacity must be ≥ 1"},
		{"max in flight", func(o *topic.Options) { o.AckPropagation.MaxInFlight = -1 }, "ack_propagation.max_in_flight must be ≥ 1"},
		{"timeout", func(o *topic.Options) { o.AckPropagation.Timeout = time.Microsecond }, "ack_propagation.timeout must be ≥ 1ms"},
		{"timeout bound", func(o *topic.Options) { o.AckPropagation.Timeout = topic.MaxTimeout + 1 }, "ack_propagation.timeout must be ≤ 24h"},
		{"mode", func(o *topic.Options) { o.Mode = 9 }, "mode must be one of [balanced_only broadcast_only mixed]"},
		{"on_full", func(o *topic.Options) { o.Balanced.OnFull = 5 }, "balanced.on_full must be one of [block drop_newest]"},
		{"on_lag", func(o *topic.Options) { o.Broadcast.OnLag = -1 }, "broadcast.on_lag must be one of [drop_oldest disconnect]"},
		{"ack_mode", func(o *topic.Options) { o.Broadcast.AckMode = 2 }, "broadcast.ack_mode must be one of [first all]"},
		{"propagation", func(o *topic.Options) { o.AckPropagation.Mode = 3 }, "ack_propagation.mode must be one of [disabled auto]"},
		{"all without auto", func(o *topic.Options) {
			o.Mode, o.Broadcast.AckMode, o.Broadcast.OnLag = topic.BroadcastOnly, topic.AckAll, topic.Disconnect
		}, "broadcast.ack_mode all requires ack_propagation.mode auto"},
		{"all with drop_oldest", func(o *topic.Options) {
			o.Mode, o.Broadcast.AckMode, o.AckPropagation.Mode = topic.BroadcastOnly, topic.AckAll, topic.PropagationAuto
		}, "broadcast.ack_mode all requires broadcast.on_lag disconnect"},
		{"all on mixed", func(o *topic.Options) {
			o.Mode, o.Broadcast.AckMode, o.Broadcast.OnLag, o.AckPropagation.Mode = topic.Mixed, topic.AckAll, topic.Disconnect, topic.PropagationAuto
		}, "broadcast.ack_mode all requires mode broadcast_only, not mixed"},
		{"all on balanced-only", func(o *topic.Options) {
			o.Mode, o.Broadcast.AckMode, o.Broadcast.OnLag, o.AckPropagation.Mode = topic.BalancedOnly, topic.AckAll, topic.Disconnect, topic.PropagationAuto
		}, "broadcast.ack_mode all requires mode broadcast_only, not balanced_only"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := topic.Options{}.WithDefaults()
			c.mutate(&o)
			err := o.Validate()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate = %v, want it to contain %q", err, c.want)
			}
			if !errors.Is(err, validate.ErrInvalid) {
				t.Fatalf("%v does not wrap validate.ErrInvalid", err)
			}
			err = o.ValidateAs("topics.ingress.policies")
			if err == nil || !strings.Contains(err.Error(), "topics.ingress.policies."+c.want) {
				t.Fatalf("ValidateAs = %v, want the prefixed field", err)
			}
		})
	}
	// Every broken rule is reported, not only the first.
	o := topic.Options{Balanced: topic.BalancedPolicy{Capacity: -1}, Broadcast: topic.BroadcastPolicy{Capacity: -1}}.WithDefaults()
	var es validate.Errors
	if err := o.Validate(); !errors.As(err, &es) || !es.Has("balanced.queue_capacity", "gte") || !es.Has("broadcast.queue_capacity", "gte") {
		t.Fatalf("Validate = %v, want both capacities", o.Validate())
	}
}

// Every enum parses its String form, round-trips through text, and rejects
// unknown names.
func TestEnumsText(t *testing.T) {
	check := func(name string, s string, parse func(string) (string, error)) {
		t.Helper()
		got, err := parse(s)
		if err != nil || got != s {
			t.Fatalf("%s: parse(%q) = %q, %v", name, s, got, err)
		}
	}
	for _, s := range []string{"balanced_only", "broadcast_only", "mixed"} {
		check("mode", s, func(s string) (string, error) {
			var m topic.Mode
			err := m.UnmarshalText([]byte(s))
			b, _ := m.MarshalText()
			return string(b), err
		})
	}
	for _, s := range []string{"block", "drop_newest"} {
		check("on_full", s, func(s string) (string, error) {
			var v topic.OnFull
			err := v.UnmarshalText([]byte(s))
			b, _ := v.MarshalText()
			return string(b), err
		})
	}
	for _, s := range []string{"drop_oldest", "disconnect"} {
		check("on_lag", s, func(s string) (string, error) {
			var v topic.OnLag
			err := v.UnmarshalText([]byte(s))
			b, _ := v.MarshalText()
			return string(b), err
		})
	}
	for _, s := range []string{"first", "all"} {
		check("ack_mode", s, func(s string) (string, error) {
			var v topic.AckMode
			err := v.UnmarshalText([]byte(s))
			b, _ := v.MarshalText()
			return string(b), err
		})
	}
	for _, s := range []string{"disabled", "auto"} {
		check("propagation", s, func(s string) (string, error) {
			var v topic.PropagationMode
			err := v.UnmarshalText([]byte(s))
			b, _ := v.MarshalText()
			return string(b), err
		})
	}
	if _, err := topic.ParseMode("balanced"); err == nil {
		t.Fatal("ParseMode accepted an unknown name")
	}
	if _, err := topic.ParseOnFull("drop"); err == nil {
		t.Fatal("ParseOnFull accepted an unknown name")
	}
	if _, err := topic.ParseOnLag(""); err == nil {
		t.Fatal("ParseOnLag accepted an empty name")
	}
	if _, err := topic.ParseAckMode("any"); err == nil {
		t.Fatal("ParseAckMode accepted an unknown name")
	}
	if _, err := topic.ParsePropagationMode("on"); err == nil {
		t.Fatal("ParsePropagationMode accepted an unknown name")
	}
	var m topic.Mode = topic.Mixed
	if err := m.UnmarshalText([]byte("nope")); err == nil || m != topic.Mixed {
		t.Fatalf("failed UnmarshalText changed the value to %v", m)
	}
}

// limitedBackend is InMemory declaring fewer capabilities, and counting how
// often it is asked about them and asked to create topics.
type limitedBackend struct {
	caps    topic.Capabilities
	asked   *atomic.Int64
	created *atomic.Int64
}

func (b limitedBackend) Name() string { return "limited" }
func (b limitedBackend) Capabilities() topic.Capabilities {
	b.asked.Add(1)
	return b.caps
}
func (b limitedBackend) NewTopic(ctx context.Context, n topic.Name, o topic.Options) (topic.State[int], error) {
	b.created.Add(1)
	return topic.InMemory[int]{}.NewTopic(ctx, n, o)
}

// Creation fails with unsupported-mode / unsupported-policy errors naming
// the backend and setting, before the backend creates anything; a backend
// with no modes is an unsupported backend.
func TestCapabilityContract(t *testing.T) {
	full := topic.InMemory[int]{}.Capabilities()
	cases := []struct {
		name  string
		caps  func(c *topic.Capabilities)
		opts  topic.Options
		err   error
		what  string
		value string
	}{
		{"mode", func(c *topic.Capabilities) { c.Modes = []topic.Mode{topic.BalancedOnly} }, topic.Options{Mode: topic.Mixed}, topic.ErrUnsupportedMode, "mode", "mixed"},
		{"on_full", func(c *topic.Capabilities) { c.OnFull = []topic.OnFull{topic.Block} },
			topic.Options{Balanced: topic.BalancedPolicy{OnFull: topic.DropNewest}}, topic.ErrUnsupportedPolicy, "balanced.on_full", "drop_newest"},
		{"on_lag", func(c *topic.Capabilities) { c.OnLag = []topic.OnLag{topic.DropOldest} },
			topic.Options{Mode: topic.BroadcastOnly, Broadcast: topic.BroadcastPolicy{OnLag: topic.Disconnect}}, topic.ErrUnsupportedPolicy, "broadcast.on_lag", "disconnect"},
		{"ack_mode", func(c *topic.Capabilities) { c.AckModes = []topic.AckMode{topic.AckFirst} },
			topic.Options{Mode: topic.BroadcastOnly, Broadcast: topic.BroadcastPolicy{OnLag: topic.Disconnect, AckMode: topic.AckAll},
				AckPropagation: topic.AckPropagation{Mode: topic.PropagationAuto}}, topic.ErrUnsupportedPolicy, "broadcast.ack_mode", "all"},
		{"propagation", func(c *topic.Capabilities) { c.Propagation = []topic.PropagationMode{topic.PropagationDisabled} },
			topic.Options{AckPropagation: topic.AckPropagation{Mode: topic.PropagationAuto}}, topic.ErrUnsupportedPolicy, "ack_propagation.mode", "auto"},
		{"backend", func(c *topic.Capabilities) { *c = topic.Capabilities{} }, topic.Options{}, topic.ErrUnsupportedBackend, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			caps := full
			c.caps(&caps)
			be := limitedBackend{caps: caps, asked: new(atomic.Int64), created: new(atomic.Int64)}
			_, err := topic.NewBroker[int]().CreateTopic("t", c.opts, be)
			if !errors.Is(err, c.err) {
				t.Fatalf("CreateTopic = %v, want %v", err, c.err)
			}
			var ue *topic.UnsupportedError
			if !errors.As(err, &ue) || ue.Backend != "limited" || ue.What != c.what || ue.Value != c.value {
				t.Fatalf("error %#v does not name backend/setting/value", ue)
			}
			if be.created.Load() != 0 {
				t.Fatal("backend created a topic it does not support")
			}
		})
	}
	// Policies the mode does not use are not checked.
	caps := full
	caps.OnLag = nil
	caps.AckModes = nil
	if err := topic.CheckCapabilities("x", caps, topic.Options{Mode: topic.BalancedOnly}.WithDefaults()); err != nil {
		t.Fatalf("balanced-only topic checked broadcast policies: %v", err)
	}
	if _, err := topic.BackendByName[int]("in_memory"); err != nil {
		t.Fatal(err)
	}
	if _, err := topic.BackendByName[int]("kafka"); !errors.Is(err, topic.ErrUnsupportedBackend) {
		t.Fatalf("BackendByName(kafka) = %v", err)
	}
}

// Capabilities are consulted at creation only, never by publish, subscribe,
// receive or ack.
func TestCapabilitiesNotOnHotPath(t *testing.T) {
	be := limitedBackend{caps: topic.InMemory[int]{}.Capabilities(), asked: new(atomic.Int64), created: new(atomic.Int64)}
	b := topic.NewBroker[int]()
	defer b.Close()
	h, err := b.CreateTopic("t", topic.Options{Mode: topic.Mixed}, be)
	if err != nil {
		t.Fatal(err)
	}
	asked := be.asked.Load()
	g, _ := h.Subscribe(t.Context(), topic.Balanced("g"), topic.SubscriberOptions{})
	bc, _ := h.Subscribe(t.Context(), topic.Broadcast(), topic.SubscriberOptions{})
	p, _ := h.Tracked(topic.TrackedOptions{})
	ctx := context.Background()
	for i := range 100 {
		if _, err := p.Publish(ctx, i); err != nil {
			t.Fatal(err)
		}
		if _, err := h.TryPublish(i); err != nil {
			t.Fatal(err)
		}
	}
	for range 200 {
		it, err := g.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_ = g.Ack(it.ID)
		if _, err := bc.Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if be.asked.Load() != asked {
		t.Fatalf("Capabilities called %d times after creation", be.asked.Load()-asked)
	}
}

// Tracked options reject negative values; zero values take the topic's.
func TestTrackedOptions(t *testing.T) {
	h, err := topic.NewTopic[int]("t", topic.Options{AckPropagation: topic.AckPropagation{MaxInFlight: 3}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := h.Tracked(topic.TrackedOptions{MaxInFlight: -1}); err == nil || !strings.Contains(err.Error(), "max_in_flight") {
		t.Fatalf("negative MaxInFlight: %v", err)
	}
	if _, err := h.Tracked(topic.TrackedOptions{Timeout: -1}); err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("negative Timeout: %v", err)
	}
	p, err := h.Tracked(topic.TrackedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, out, _ := p.TryPublish(1); out != topic.Published {
			t.Fatalf("TryPublish = %v", out)
		}
	}
	// No subscriber: each publish was nacked at once, so slots are free.
	if p.InFlight() != 0 {
		t.Fatalf("InFlight = %d", p.InFlight())
	}
	if _, err := topic.NewTopic[int]("", topic.Options{}, nil); !errors.Is(err, topic.ErrEmptyName) {
		t.Fatalf("NewTopic(\"\") = %v", err)
	}
}

// Under concurrent publishing, acking, nacking, subscription churn and a
// final topic close, every tracked publish resolves exactly once and
// nothing stays in flight.
func TestTrackedResolvesExactlyOnceUnderChurn(t *testing.T) {
	for _, o := range []topic.Options{
		{Mode: topic.BalancedOnly, Balanced: topic.BalancedPolicy{Capacity: 8}},
		{Mode: topic.Mixed, Balanced: topic.BalancedPolicy{Capacity: 8}, Broadcast: topic.BroadcastPolicy{Capacity: 8}},
		{Mode: topic.BroadcastOnly, Broadcast: topic.BroadcastPolicy{Capacity: 8, OnLag: topic.Disconnect, AckMode: topic.AckAll},
			AckPropagation: topic.AckPropagation{Mode: topic.PropagationAuto}},
	} {
		t.Run(o.Mode.String(), func(t *testing.T) {
			h, err := topic.NewTopic[int]("t", o, nil)
			if err != nil {
				t.Fatal(err)
			}
			p, err := h.Tracked(topic.TrackedOptions{MaxInFlight: 16, Timeout: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			const n = 3000
			var calls sync.Map
			var resolved atomic.Int64
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var wg sync.WaitGroup
			mode := topic.Balanced("g")
			if o.Mode == topic.BroadcastOnly {
				mode = topic.Broadcast()
			}
			for w := range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for ctx.Err() == nil {
						s, err := h.Subscribe(t.Context(), mode, topic.SubscriberOptions{})
						if err != nil {
							return
						}
						for i := 0; i < 20; i++ {
							rctx, rcancel := context.WithTimeout(ctx, 20*time.Millisecond)
							it, err := s.Receive(rctx)
							rcancel()
							if errors.Is(err, topic.ErrSubscriptionClosed) {
								break
							}
							if err != nil || it.Lagged > 0 {
								continue
							}
							if (int(it.ID)+w)%5 == 0 {
								_ = s.Nack(it.ID, errors.New("no"))
							} else if (int(it.ID)+w)%7 != 0 {
								_ = s.Ack(it.ID)
							}
						}
						s.Close()
					}
				}()
			}
			published := 0
			for i := range n {
				err := p.PublishFunc(ctx, i, func(topic.Result) {
					if _, dup := calls.LoadOrStore(i, true); dup {
						t.Errorf("publish %d resolved twice", i)
					}
					resolved.Add(1)
				})
				if err == nil {
					published++
				}
				if i == n-200 {
					// Close while publishes are in flight and subscribers
					// are active.
					wg.Add(1)
					go func() {
						defer wg.Done()
						h.Close()
					}()
				}
			}
			cancel()
			wg.Wait()
			p.Close()
			h.Close()
			if resolved.Load() != int64(published) {
				t.Fatalf("%d publishes, %d resolved", published, resolved.Load())
			}
			if h.Stats().InFlight != 0 || p.InFlight() != 0 {
				t.Fatalf("in flight after close: %d / %d", h.Stats().InFlight, p.InFlight())
			}
		})
	}
}

// Guarantee: TrackedOptions.Validate names each broken rule with its
// field, as NewTrackedPublisher reports it, and WithDefaults leaves the
// zero fields to the topic but FailureLogInterval, which takes its
// default.
func TestTrackedOptionsValidate(t *testing.T) {
	var errs validate.Errors
	err := topic.TrackedOptions{MaxInFlight: -1, Timeout: -time.Second, OnFull: topic.OnFull(99)}.Validate()
	if !errors.As(err, &errs) || !errs.Has("max_in_flight", "gte") || !errs.Has("timeout", "gte") || !errs.Has("on_full", "oneof") {
		t.Fatalf("Validate() = %v, want max_in_flight, timeout and on_full", err)
	}
	if o := (topic.TrackedOptions{}).WithDefaults(); o != (topic.TrackedOptions{FailureLogInterval: topic.DefaultFailureLogInterval}) {
		t.Fatalf("WithDefaults() = %+v, want the zero value (the topic's values) but for FailureLogInterval, %s", o, topic.DefaultFailureLogInterval)
	}
	if err := (topic.TrackedOptions{Timeout: topic.MaxTimeout + 1}).Validate(); !errors.As(err, &errs) || !errs.Has("timeout", "lte") {
		t.Fatalf("Validate() with Timeout past MaxTimeout = %v, want timeout lte", err)
	}
	if err := (topic.TrackedOptions{MaxInFlight: 8, Timeout: topic.MaxTimeout}).Validate(); err != nil {
		t.Fatalf("valid options: %v", err)
	}
}

// Guarantee: a tracked publisher's Timeout is 0 (the topic's) or at least
// 1ms: a shorter positive one, whose timer would fire without pause, is
// refused by Validate and by Handle.Tracked with an error naming the field
// and the rule, and 1ms is accepted.
func TestTrackedTimeoutIsAtLeastOneMillisecond(t *testing.T) {
	h := newIntTopic(t, topic.Options{})
	for _, d := range []time.Duration{time.Nanosecond, time.Microsecond, time.Millisecond - 1} {
		_, terr := h.Tracked(topic.TrackedOptions{Timeout: d})
		for call, err := range map[string]error{"Validate": topic.TrackedOptions{Timeout: d}.Validate(), "Tracked": terr} {
			var errs validate.Errors
			if !errors.As(err, &errs) || !errs.Has("timeout", "gte") || !strings.Contains(err.Error(), "timeout must be ≥ 1ms") {
				t.Errorf("%s with Timeout %s = %v, want a validate.Errors saying timeout must be ≥ 1ms", call, d, err)
			}
		}
	}
	for _, d := range []time.Duration{0, time.Millisecond} {
		if err := (topic.TrackedOptions{Timeout: d}).Validate(); err != nil {
			t.Errorf("Timeout %s refused by Validate: %v", d, err)
		}
		p, err := h.Tracked(topic.TrackedOptions{Timeout: d})
		if err != nil {
			t.Errorf("Timeout %s refused by Tracked: %v", d, err)
			continue
		}
		p.Close()
	}
}

// Guarantee: each bound of a topic's ack_propagation and of a tracked
// publisher's options is itself accepted, and the value just past it is
// refused with an error naming the field and the rule.
func TestAckPropagationBoundsAreInclusive(t *testing.T) {
	topicAt := func(set func(*topic.AckPropagation)) error {
		o := topic.Options{}.WithDefaults()
		set(&o.AckPropagation)
		return o.Validate()
	}
	trackedAt := func(set func(*topic.TrackedOptions)) error {
		var o topic.TrackedOptions
		set(&o)
		return o.Validate()
	}
	for _, c := range []struct {
		field, rule string
		at, past    error
	}{
		{"ack_propagation.timeout", "gte",
			topicAt(func(a *topic.AckPropagation) { a.Timeout = time.Millisecond }),
			topicAt(func(a *topic.AckPropagation) { a.Timeout = time.Millisecond - 1 })},
		{"ack_propagation.timeout", "lte",
			topicAt(func(a *topic.AckPropagation) { a.Timeout = topic.MaxTimeout }),
			topicAt(func(a *topic.AckPropagation) { a.Timeout = topic.MaxTimeout + 1 })},
		{"ack_propagation.max_in_flight", "lte",
			topicAt(func(a *topic.AckPropagation) { a.MaxInFlight = topic.MaxInFlightLimit }),
			topicAt(func(a *topic.AckPropagation) { a.MaxInFlight = topic.MaxInFlightLimit + 1 })},
		{"max_in_flight", "lte",
			trackedAt(func(o *topic.TrackedOptions) { o.MaxInFlight = topic.MaxInFlightLimit }),
			trackedAt(func(o *topic.TrackedOptions) { o.MaxInFlight = topic.MaxInFlightLimit + 1 })},
		{"timeout", "lte",
			trackedAt(func(o *topic.TrackedOptions) { o.Timeout = topic.MaxTimeout }),
			trackedAt(func(o *topic.TrackedOptions) { o.Timeout = topic.MaxTimeout + 1 })},
		{"failure_log_interval", "lte",
			trackedAt(func(o *topic.TrackedOptions) { o.FailureLogInterval = topic.MaxFailureLogInterval }),
			trackedAt(func(o *topic.TrackedOptions) { o.FailureLogInterval = topic.MaxFailureLogInterval + 1 })},
	} {
		if c.at != nil {
			t.Errorf("%s at its %s bound refused: %v", c.field, c.rule, c.at)
		}
		var errs validate.Errors
		if !errors.As(c.past, &errs) || len(errs) != 1 || !errs.Has(c.field, c.rule) {
			t.Errorf("%s just past its %s bound: Validate = %v, want one %s error on %s", c.field, c.rule, c.past, c.rule, c.field)
		}
	}
}
