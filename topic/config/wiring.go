package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/internal/quote"
	"github.com/boulevard-go/boulevard/validate"
)

// ErrWiringCycle is wrapped by *CycleError.
var ErrWiringCycle = errors.New("config: wiring cycle")

// CycleError reports a loop in the wiring graph: a message published by a
// pipeline could come back to it through topics. Path alternates pipelines
// and topics and ends where it started, for example
// ["pipeline a", "topic t1", "pipeline b", "topic t2", "pipeline a"].
type CycleError struct {
	// Path is the loop, from a pipeline back to it.
	Path []string
}

// Error returns "config: wiring cycle: pipeline a → topic t1 → … → pipeline a".
func (e *CycleError) Error() string {
	return ErrWiringCycle.Error() + ": " + strings.Join(e.Path, " → ")
}

// Unwrap returns ErrWiringCycle.
func (e *CycleError) Unwrap() error { return ErrWiringCycle }

// Kind is how a pipeline subscribes to a topic.
type Kind int

const (
	// Balanced (the default) joins a consumer group: each message goes to
	// one member of the group.
	Balanced Kind = iota
	// Broadcast receives every message published after it subscribed.
	Broadcast
)

// String returns "balanced" or "broadcast".
func (k Kind) String() string {
	switch k {
	case Balanced:
		return "balanced"
	case Broadcast:
		return "broadcast"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Wiring says which pipelines subscribe to and publish to which topics.
type Wiring struct {
	// Pipelines are the pipelines, each with a unique name.
	Pipelines []Pipeline `validate:"dive"`
}

// Pipeline is one pipeline's use of topics. A topic is named as the
// pipeline sees it: a topic declared under groups.<Group>.topics takes
// precedence over a global one of the same name.
type Pipeline struct {
	// Name identifies the pipeline. Required, unique.
	Name string `validate:"required"`
	// Group is the pipeline group the pipeline belongs to; "" for none.
	// It selects the group-scoped topics the pipeline sees.
	Group string
	// Subscribes are the topics the pipeline's sources read.
	Subscribes []Subscribe `validate:"dive"`
	// Publishes are the topics the pipeline publishes into.
	Publishes []Publish `validate:"dive"`
}

// Subscribe is one subscription of a pipeline.
type Subscribe struct {
	// Topic is the topic's name as the pipeline sees it. Required.
	Topic string `validate:"required"`
	// Mode is Balanced (default) or Broadcast.
	Mode Kind `validate:"gte=0,lte=1"`
	// ConsumerGroup is the balanced consumer group. Default: the
	// pipeline's name. Must be empty for Broadcast.
	ConsumerGroup string `name:"consumer_group"`
}

// Publish is one topic a pipeline publishes into.
type Publish struct {
	// Topic is the topic's name as the pipeline sees it. Required.
	Topic string `validate:"required"`
	// QueueOnFull overrides the topic's policies.balanced.on_full for this
	// publisher: "block" or "drop_newest"; "" (default) keeps the topic's.
	// It does not change the broadcast lag policy.
	QueueOnFull string `name:"queue_on_full" validate:"omitempty,oneof=block drop_newest"`
}

// Plan is a resolved wiring: every declared topic with the mode it will be
// created with, and every pipeline's bindings. Build turns it into topics.
type Plan struct {
	// Topics are all declared topics, sorted by name.
	Topics []TopicPlan
	// Pipelines are the wired pipelines, in wiring order.
	Pipelines []PipelinePlan
}

// TopicPlan is one topic to create.
type TopicPlan struct {
	// Name is the topic's name on the broker: the declared name for
	// topics.<name>, "<group>/<name>" for groups.<group>.topics.<name>.
	Name topic.Name
	// Path is where the topic is declared, for example "topics.ingress".
	Path string
	// Backend is the name of the backend that implements it.
	Backend string
	// Connection is the name of the connection a kafka or pulsar topic
	// uses ("" for other backends), and Conn that connection.
	Connection string
	Conn       *ConnectionSpec
	// Options are the topic's options, with Mode inferred from the wiring.
	Options topic.Options
	// BalancedGroups are the consumer groups that subscribe to it, sorted.
	BalancedGroups []topic.GroupName
	// Broadcasters are the pipelines that subscribe to it in broadcast
	// mode, in wiring order.
	Broadcasters []string
	// Publishers are the pipelines that publish into it, in wiring order.
	Publishers []string
}

// PipelinePlan is one pipeline's bindings.
type PipelinePlan struct {
	// Name is the pipeline's name.
	Name string
	// Bindings are the pipeline's subscriptions then its publications, in
	// wiring order.
	Bindings []BindingPlan
}

// Role says whether a binding subscribes or publishes.
type Role int

const (
	// Subscriber bindings feed a topic source.
	Subscriber Role = iota
	// Publisher bindings publish into the topic.
	Publisher
)

// String returns "subscriber" or "publisher".
func (r Role) String() string {
	if r == Publisher {
		return "publisher"
	}
	return "subscriber"
}

// BindingPlan is one pipeline-local topic alias.
type BindingPlan struct {
	// Alias is the name the pipeline used for the topic.
	Alias string
	// Topic is the topic's name on the broker.
	Topic topic.Name
	// Role is Subscriber or Publisher.
	Role Role
	// Kind is how a Subscriber binding subscribes.
	Kind Kind
	// Group is a balanced Subscriber binding's consumer group.
	Group topic.GroupName
	// OnFull is the resolved balanced full-queue policy: the publisher's
	// queue_on_full, else the topic's policies.balanced.on_full.
	OnFull topic.OnFull
	// AckPropagation is the topic's ack_propagation policy.
	AckPropagation topic.AckPropagation
}

// SubscriptionMode returns the topic subscription mode of a Subscriber
// binding.
func (b BindingPlan) SubscriptionMode() topic.SubscriptionMode {
	if b.Kind == Broadcast {
		return topic.Broadcast()
	}
	return topic.Balanced(b.Group)
}

// declared is one topic declaration found in a Config.
type declared struct {
	name topic.Name
	path string
	spec TopicSpec
	plan *TopicPlan
}

// Resolve checks a wiring against the declarations in cfg and returns the
// plan Build executes. It fails, before anything is created, when
//
//   - a pipeline is unnamed or named twice, or uses a topic twice;
//   - a pipeline names a topic that is not declared;
//   - a broadcast subscription names a consumer group;
//   - a topic with broadcast.ack_mode all is not broadcast-only (a balanced
//     subscriber makes it balanced-only or mixed);
//
// all reported together as validate.Errors, and then when the wiring has a
// cycle (*CycleError, wrapping ErrWiringCycle).
//
// A topic's mode is inferred from its subscriptions: balanced ones in a
// single consumer group give topic.BalancedOnly; broadcast ones only give
// topic.BroadcastOnly; both, or balanced ones in more than one group, give
// topic.Mixed (the balanced-only variant serves one group). A topic nobody
// subscribes to is BalancedOnly, or BroadcastOnly when its ack_mode is all.
// impl_selection force_mixed always gives topic.Mixed.
func Resolve(cfg *Config, w Wiring) (*Plan, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	// Every declaration, global and group-scoped. Parse checked the names;
	// a Config built by hand may hold any.
	var errs problems
	var decls []*declared
	globals := map[string]*declared{}
	scoped := map[string]map[string]*declared{}
	for _, name := range sortedKeys(cfg.Topics) {
		d := &declared{name: topic.Name(name), path: "topics." + topic.SafeName(name), spec: cfg.Topics[name]}
		errs.add(checkName(d.path, name))
		decls = append(decls, d)
		globals[name] = d
	}
	for _, g := range sortedKeys(cfg.Groups) {
		gpath := "groups." + topic.SafeName(g)
		errs.add(checkName(gpath, g))
		scoped[g] = map[string]*declared{}
		for _, name := range sortedKeys(cfg.Groups[g].Topics) {
			d := &declared{name: topic.Name(g + "/" + name), path: gpath + ".topics." + topic.SafeName(name), spec: cfg.Groups[g].Topics[name]}
			errs.add(checkName(d.path, name))
			decls = append(decls, d)
			scoped[g][name] = d
		}
	}
	lookup := func(group, alias string) *declared {
		if d, ok := scoped[group][alias]; ok {
			return d
		}
		return globals[alias]
	}

	plan := &Plan{}
	for _, d := range decls {
		opts, err := d.spec.Options()
		if err != nil {
			// Parse validated the spec; only a Config built by hand gets here.
			errs.add(validate.Field(d.path, "invalid", quote.Text(err.Error())))
		}
		tp := TopicPlan{Name: d.name, Path: d.path, Backend: d.spec.Backend, Connection: d.spec.Connection, Options: opts}
		if c, ok := cfg.Connections[d.spec.Connection]; ok && d.spec.Connection != "" {
			tp.Conn = &c
		}
		plan.Topics = append(plan.Topics, tp)
	}
	slices.SortFunc(plan.Topics, func(a, b TopicPlan) int { return strings.Compare(string(a.Name), string(b.Name)) })
	for _, d := range decls {
		i, _ := slices.BinarySearchFunc(plan.Topics, d.name, func(t TopicPlan, n topic.Name) int {
			return strings.Compare(string(t.Name), string(n))
		})
		d.plan = &plan.Topics[i]
	}

	errs.add(validate.Struct("wiring", &w))
	pipelineAt := map[string]int{}
	// edges of the wiring graph, for the cycle check
	publishesTo := make([][]*declared, len(w.Pipelines))
	subscribers := map[topic.Name][]int{}
	for pi, p := range w.Pipelines {
		ppath := fmt.Sprintf("wiring.pipelines[%d]", pi)
		errs.add(wiringName(ppath+".name", p.Name))
		errs.add(wiringName(ppath+".group", p.Group))
		if p.Name != "" {
			if j, dup := pipelineAt[p.Name]; dup {
				errs.add(validate.Field(ppath+".name", "unique",
					fmt.Sprintf("must be unique: %s is already the name of wiring.pipelines[%d]", quote.Value(p.Name), j)))
			} else {
				pipelineAt[p.Name] = pi
			}
		}
		pp := PipelinePlan{Name: p.Name}
		aliases := map[string]string{}
		useAlias := func(field, alias string) bool {
			if prev, dup := aliases[alias]; dup {
				errs.add(validate.Field(field, "unique",
					fmt.Sprintf("%s is already used by %s of the same pipeline", quote.Value(alias), prev)))
				return false
			}
			aliases[alias] = field
			return true
		}
		for si, s := range p.Subscribes {
			field := fmt.Sprintf("%s.subscribes[%d].topic", ppath, si)
			errs.add(wiringName(fmt.Sprintf("%s.subscribes[%d].consumer_group", ppath, si), s.ConsumerGroup))
			if s.Topic == "" {
				continue // reported by validate.Struct
			}
			d := lookup(p.Group, s.Topic)
			if d == nil {
				errs.add(notDeclared(field, p.Group, s.Topic))
				continue
			}
			if !useAlias(field, s.Topic) {
				continue
			}
			b := BindingPlan{Alias: s.Topic, Topic: d.name, Role: Subscriber, Kind: s.Mode,
				OnFull: d.plan.Options.Balanced.OnFull, AckPropagation: d.plan.Options.AckPropagation}
			switch s.Mode {
			case Balanced:
				g := s.ConsumerGroup
				if g == "" {
					g = p.Name
				}
				b.Group = topic.GroupName(g)
				if g != "" && !slices.Contains(d.plan.BalancedGroups, b.Group) {
					d.plan.BalancedGroups = append(d.plan.BalancedGroups, b.Group)
				}
			case Broadcast:
				if s.ConsumerGroup != "" {
					errs.add(validate.Field(fmt.Sprintf("%s.subscribes[%d].consumer_group", ppath, si), "excluded_with",
						"must be empty for a broadcast subscription"))
				}
				d.plan.Broadcasters = append(d.plan.Broadcasters, p.Name)
			}
			subscribers[d.name] = append(subscribers[d.name], pi)
			pp.Bindings = append(pp.Bindings, b)
		}
		for qi, q := range p.Publishes {
			field := fmt.Sprintf("%s.publishes[%d].topic", ppath, qi)
			if q.Topic == "" {
				continue
			}
			d := lookup(p.Group, q.Topic)
			if d == nil {
				errs.add(notDeclared(field, p.Group, q.Topic))
				continue
			}
			if prev, dup := aliases[q.Topic]; dup && strings.Contains(prev, ".subscribes[") {
				// A pipeline that subscribes to and publishes into the same
				// topic: the cycle check below reports it as feedback.
				publishesTo[pi] = append(publishesTo[pi], d)
				continue
			}
			if !useAlias(field, q.Topic) {
				continue
			}
			b := BindingPlan{Alias: q.Topic, Topic: d.name, Role: Publisher,
				OnFull: d.plan.Options.Balanced.OnFull, AckPropagation: d.plan.Options.AckPropagation}
			if q.QueueOnFull != "" {
				if of, err := topic.ParseOnFull(q.QueueOnFull); err == nil {
					b.OnFull = of
				}
			}
			d.plan.Publishers = append(d.plan.Publishers, p.Name)
			publishesTo[pi] = append(publishesTo[pi], d)
			pp.Bindings = append(pp.Bindings, b)
		}
		plan.Pipelines = append(plan.Pipelines, pp)
	}

	for _, d := range decls {
		tp := d.plan
		slices.Sort(tp.BalancedGroups)
		tp.Options.Mode = inferMode(d.spec, tp)
		if d.spec.Policies.Broadcast.AckMode == "all" && tp.Options.Mode != topic.BroadcastOnly &&
			d.spec.ImplSelection != ImplForceMixed { // force_mixed is reported by Parse
			errs.add(validate.Field(d.path+".policies.broadcast.ack_mode", "ack_mode_all",
				fmt.Sprintf("all requires a broadcast-only topic, but balanced consumer group(s) %s subscribe, which makes it %s",
					groupList(tp.BalancedGroups), tp.Options.Mode)))
		}
	}
	if err := errs.err(); err != nil {
		return nil, err
	}
	// A hand-built Config may hold what Parse would have rejected: check the
	// options the broker will get.
	for _, tp := range plan.Topics {
		errs.add(tp.Options.ValidateAs(tp.Path + ".policies"))
	}
	if err := errs.err(); err != nil {
		return nil, err
	}
	if err := findCycle(w, publishesTo, subscribers); err != nil {
		return nil, err
	}
	return plan, nil
}

func notDeclared(field, group, alias string) error {
	where := "topics." + topic.SafeName(alias)
	if group != "" {
		where = "groups." + topic.SafeName(group) + ".topics." + topic.SafeName(alias) + " or " + where
	}
	return validate.Field(field, "declared", fmt.Sprintf("%s is not declared (no %s)", quote.Value(alias), where))
}

// wiringName checks a name the wiring gives (a pipeline, its group, a
// consumer group): "" is left to the required rules, anything else must
// be a valid topic.GroupName.
func wiringName(field, name string) error {
	var ne *topic.NameError
	if err := topic.GroupName(name).Validate(); name != "" && errors.As(err, &ne) {
		return validate.Field(field, "name", quote.Value(name)+" "+ne.Reason)
	}
	return nil
}

// groupList names at most MaxListedErrors groups, then how many more.
func groupList(gs []topic.GroupName) string {
	parts := make([]string, 0, len(gs))
	for i, g := range gs {
		if i == MaxListedErrors {
			parts = append(parts, fmt.Sprintf("and %d more", len(gs)-i))
			break
		}
		parts = append(parts, topic.SafeName(string(g)))
	}
	return strings.Join(parts, ", ")
}

// inferMode picks the cheapest mode that serves every subscription.
func inferMode(spec TopicSpec, tp *TopicPlan) topic.Mode {
	if spec.ImplSelection == ImplForceMixed {
		return topic.Mixed
	}
	balanced, broadcast := len(tp.BalancedGroups), len(tp.Broadcasters)
	switch {
	case balanced > 0 && broadcast > 0, balanced > 1:
		return topic.Mixed
	case broadcast > 0:
		return topic.BroadcastOnly
	case balanced == 1:
		return topic.BalancedOnly
	case spec.Policies.Broadcast.AckMode == "all":
		return topic.BroadcastOnly
	default:
		return topic.BalancedOnly
	}
}

// findCycle looks for a loop pipeline → topic → pipeline → … with a depth
// first search from each pipeline in wiring order, following publications
// and then subscribers in wiring order, so the reported cycle is
// deterministic.
func findCycle(w Wiring, publishesTo [][]*declared, subscribers map[topic.Name][]int) error {
	const (
		white = iota
		grey
		black
	)
	color := make([]int, len(w.Pipelines))
	var stack []string // alternating "pipeline x", "topic t"
	var onStack []int  // pipeline index of each pipeline entry in stack
	var visit func(pi int) *CycleError
	visit = func(pi int) *CycleError {
		color[pi] = grey
		stack = append(stack, "pipeline "+topic.SafeName(w.Pipelines[pi].Name))
		onStack = append(onStack, pi)
		for _, d := range publishesTo[pi] {
			stack = append(stack, "topic "+topic.SafeName(string(d.name)))
			for _, next := range subscribers[d.name] {
				switch color[next] {
				case grey:
					// The cycle starts where next entered the stack.
					start := slices.Index(onStack, next) * 2
					path := append(slices.Clone(stack[start:]), "pipeline "+topic.SafeName(w.Pipelines[next].Name))
					return &CycleError{Path: path}
				case white:
					if c := visit(next); c != nil {
						return c
					}
				}
			}
			stack = stack[:len(stack)-1]
		}
		stack = stack[:len(stack)-1]
		onStack = onStack[:len(onStack)-1]
		color[pi] = black
		return nil
	}
	for pi := range w.Pipelines {
		if color[pi] == white {
			if c := visit(pi); c != nil {
				return c
			}
		}
	}
	return nil
}
