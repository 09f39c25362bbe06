package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/validate"
)

// ErrSyntax is wrapped by the error Parse returns for a document that is not
// well-formed YAML. Every other problem Parse finds is a validate.Errors value
// (wrapping validate.ErrInvalid) naming the YAML path.
var ErrSyntax = errors.New("topic config: malformed YAML")

// DefaultBackend is the backend a topic uses when it names none: the
// built-in in-memory backend.
const DefaultBackend = "in_memory"

// Values of impl_selection.
const (
	// ImplAuto (the default) lets Resolve pick the topic's mode from how the
	// pipelines subscribe to it.
	ImplAuto = "auto"
	// ImplForceMixed always selects topic.Mixed.
	ImplForceMixed = "force_mixed"
)

// Config is a parsed and validated topic document, with every default
// filled in.
type Config struct {
	// Topics are the global topic declarations, by name (topics.<name>).
	Topics map[string]TopicSpec
	// Groups are the pipeline groups' topic declarations, by group name
	// (groups.<group>.topics.<name>).
	Groups map[string]GroupSpec
}

// GroupSpec is one entry of groups.<group>.
type GroupSpec struct {
	// Topics are the topics declared for the group's pipelines, by name.
	Topics map[string]TopicSpec
}

// TopicSpec is one topic declaration (topics.<name> or
// groups.<group>.topics.<name>). Field names in validation errors are the
// YAML keys.
type TopicSpec struct {
	// Backend names the backend that implements the topic. Default
	// "in_memory".
	Backend string `name:"backend" validate:"required"`
	// ImplSelection is "auto" (default: the mode is inferred from how the
	// topic is subscribed to) or "force_mixed" (always topic.Mixed).
	ImplSelection string `name:"impl_selection" validate:"oneof=auto force_mixed"`
	// Policies are the topic's policies.
	Policies PolicySpec `name:"policies"`
}

// PolicySpec is policies.* of a topic declaration.
type PolicySpec struct {
	// Balanced governs the consumer-group queues.
	Balanced BalancedSpec `name:"balanced"`
	// Broadcast governs the broadcast ring.
	Broadcast BroadcastSpec `name:"broadcast"`
	// AckPropagation governs tracked publishing across the topic.
	AckPropagation AckPropagationSpec `name:"ack_propagation"`
}

// BalancedSpec is policies.balanced.
type BalancedSpec struct {
	// QueueCapacity is the capacity of each consumer group's queue. Default
	// 1024.
	QueueCapacity int `name:"queue_capacity" validate:"gte=1"`
	// OnFull is what a publish does when a group's queue is full: "block"
	// (default) waits, "drop_newest" drops the message being published.
	// A publisher may override it with queue_on_full.
	OnFull string `name:"on_full" validate:"oneof=block drop_newest"`
}

// BroadcastSpec is policies.broadcast.
type BroadcastSpec struct {
	// QueueCapacity is the size of the broadcast ring. Default 4096.
	QueueCapacity int `name:"queue_capacity" validate:"gte=1"`
	// OnLag is what happens to a subscriber the ring has overtaken:
	// "drop_oldest" (default) reports the gap and continues from the oldest
	// retained message, "disconnect" reports the gap and closes the
	// subscription.
	OnLag string `name:"on_lag" validate:"oneof=drop_oldest disconnect"`
	// AckMode is how the Ack/Nack of broadcast subscribers resolves a
	// tracked publish: "first" (default) takes the first subscriber's
	// answer, "all" waits for every subscriber eligible at publish time.
	AckMode string `name:"ack_mode" validate:"oneof=first all"`
}

// AckPropagationSpec is policies.ack_propagation.
type AckPropagationSpec struct {
	// Mode is "disabled" (default: publishers do not learn downstream
	// outcomes) or "auto" (publishers publish tracked and resolve their
	// upstream messages from the downstream Ack/Nack).
	Mode string `name:"mode" validate:"oneof=disabled auto"`
	// MaxInFlight bounds a publisher's unresolved tracked publishes.
	// Default 1024.
	MaxInFlight int `name:"max_in_flight" validate:"gte=1"`
	// Timeout is how long a tracked publish may stay unresolved before it
	// resolves as timed out, written like "30s" or "1m30s"; at least 1ms.
	// Default 30s.
	Timeout time.Duration `name:"timeout" validate:"gte=1ms"`
}

// DefaultTopicSpec returns the declaration a topic gets when it sets
// nothing: every documented default.
func DefaultTopicSpec() TopicSpec {
	d := topic.Options{}.WithDefaults()
	return TopicSpec{
		Backend:       DefaultBackend,
		ImplSelection: ImplAuto,
		Policies: PolicySpec{
			Balanced: BalancedSpec{QueueCapacity: d.Balanced.Capacity, OnFull: d.Balanced.OnFull.String()},
			Broadcast: BroadcastSpec{
				QueueCapacity: d.Broadcast.Capacity,
				OnLag:         d.Broadcast.OnLag.String(),
				AckMode:       d.Broadcast.AckMode.String(),
			},
			AckPropagation: AckPropagationSpec{
				Mode:        d.AckPropagation.Mode.String(),
				MaxInFlight: d.AckPropagation.MaxInFlight,
				Timeout:     d.AckPropagation.Timeout,
			},
		},
	}
}

// Options converts a validated declaration into topic options. The mode is
// left at its zero value: Resolve sets it from the wiring.
func (s TopicSpec) Options() (topic.Options, error) {
	var o topic.Options
	var errs []error
	var err error
	if o.Balanced.OnFull, err = topic.ParseOnFull(s.Policies.Balanced.OnFull); err != nil {
		errs = append(errs, err)
	}
	if o.Broadcast.OnLag, err = topic.ParseOnLag(s.Policies.Broadcast.OnLag); err != nil {
		errs = append(errs, err)
	}
	if o.Broadcast.AckMode, err = topic.ParseAckMode(s.Policies.Broadcast.AckMode); err != nil {
		errs = append(errs, err)
	}
	if o.AckPropagation.Mode, err = topic.ParsePropagationMode(s.Policies.AckPropagation.Mode); err != nil {
		errs = append(errs, err)
	}
	o.Balanced.Capacity = s.Policies.Balanced.QueueCapacity
	o.Broadcast.Capacity = s.Policies.Broadcast.QueueCapacity
	o.AckPropagation.MaxInFlight = s.Policies.AckPropagation.MaxInFlight
	o.AckPropagation.Timeout = s.Policies.AckPropagation.Timeout
	return o, errors.Join(errs...)
}

// The raw types mirror the YAML document. Pointers tell an absent key (which
// takes its default) from an explicit value (which is validated as given).
type rawDocument struct {
	Topics map[string]*rawTopic `yaml:"topics"`
	Groups map[string]*rawGroup `yaml:"groups"`
}

type rawGroup struct {
	Topics map[string]*rawTopic `yaml:"topics"`
}

type rawTopic struct {
	Backend       *string      `yaml:"backend"`
	ImplSelection *string      `yaml:"impl_selection"`
	Policies      *rawPolicies `yaml:"policies"`
}

type rawPolicies struct {
	Balanced       *rawBalanced       `yaml:"balanced"`
	Broadcast      *rawBroadcast      `yaml:"broadcast"`
	AckPropagation *rawAckPropagation `yaml:"ack_propagation"`
}

type rawBalanced struct {
	QueueCapacity *int    `yaml:"queue_capacity"`
	OnFull        *string `yaml:"on_full"`
}

type rawBroadcast struct {
	QueueCapacity *int    `yaml:"queue_capacity"`
	OnLag         *string `yaml:"on_lag"`
	AckMode       *string `yaml:"ack_mode"`
}

type rawAckPropagation struct {
	Mode        *string `yaml:"mode"`
	MaxInFlight *int    `yaml:"max_in_flight"`
	Timeout     *string `yaml:"timeout"`
}

// Parse reads a topic document. An empty document declares no topics.
//
// It rejects malformed YAML (ErrSyntax), unknown keys and values of the
// wrong kind (naming the key's YAML path and line), and every value that
// breaks a rule, as one validate.Errors listing all of them, for example
//
//	topics.ingress.policies.balanced.queue_capacity must be ≥ 1
//	topics.audit.policies.broadcast.ack_mode all requires policies.ack_propagation.mode auto
//
// The rules that depend on how pipelines use a topic (its mode) are checked
// by Resolve.
func Parse(data []byte) (*Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSyntax, err)
	}
	var errs []error
	if len(root.Content) > 0 {
		checkNode("", root.Content[0], reflect.TypeFor[rawDocument](), &errs)
	}
	if len(errs) > 0 {
		return nil, validate.Join(errs...)
	}
	// The walk above names the path of every unknown key; strict decoding
	// is the backstop that guarantees no key is silently ignored.
	var raw rawDocument
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&raw); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: %w", validate.ErrInvalid, err)
	}
	cfg := &Config{Topics: map[string]TopicSpec{}, Groups: map[string]GroupSpec{}}
	for _, name := range sortedKeys(raw.Topics) {
		path := "topics." + name
		errs = append(errs, checkName(path, name))
		spec, err := buildSpec(path, raw.Topics[name])
		errs = append(errs, err)
		cfg.Topics[name] = spec
	}
	for _, g := range sortedKeys(raw.Groups) {
		gpath := "groups." + g
		errs = append(errs, checkName(gpath, g))
		gs := GroupSpec{Topics: map[string]TopicSpec{}}
		if rg := raw.Groups[g]; rg != nil {
			for _, name := range sortedKeys(rg.Topics) {
				path := gpath + ".topics." + name
				errs = append(errs, checkName(path, name))
				spec, err := buildSpec(path, rg.Topics[name])
				errs = append(errs, err)
				gs.Topics[name] = spec
			}
		}
		cfg.Groups[g] = gs
	}
	if err := validate.Join(errs...); err != nil {
		return nil, err
	}
	return cfg, nil
}

// checkName rejects names that cannot be topic or group names: empty ones,
// and ones holding "/" (which separates a group from its topic in the
// broker's names).
func checkName(path, name string) error {
	switch {
	case name == "":
		return validate.Field(path, "required", "must have a non-empty name")
	case strings.Contains(name, "/"):
		return validate.Field(path, "excludes", fmt.Sprintf("name %q must not contain \"/\"", name))
	}
	return nil
}

// buildSpec fills the defaults into a raw declaration and validates it.
func buildSpec(path string, r *rawTopic) (TopicSpec, error) {
	s := DefaultTopicSpec()
	var errs []error
	if r != nil {
		setString(&s.Backend, r.Backend)
		setString(&s.ImplSelection, r.ImplSelection)
		if p := r.Policies; p != nil {
			if b := p.Balanced; b != nil {
				setInt(&s.Policies.Balanced.QueueCapacity, b.QueueCapacity)
				setString(&s.Policies.Balanced.OnFull, b.OnFull)
			}
			if b := p.Broadcast; b != nil {
				setInt(&s.Policies.Broadcast.QueueCapacity, b.QueueCapacity)
				setString(&s.Policies.Broadcast.OnLag, b.OnLag)
				setString(&s.Policies.Broadcast.AckMode, b.AckMode)
			}
			if a := p.AckPropagation; a != nil {
				setString(&s.Policies.AckPropagation.Mode, a.Mode)
				setInt(&s.Policies.AckPropagation.MaxInFlight, a.MaxInFlight)
				if a.Timeout != nil {
					d, err := time.ParseDuration(*a.Timeout)
					if err != nil {
						errs = append(errs, validate.Field(path+".policies.ack_propagation.timeout", "duration",
							fmt.Sprintf("must be a duration such as 30s or 1m30s, not %q", *a.Timeout)))
						d = s.Policies.AckPropagation.Timeout // keep validating the rest
					}
					s.Policies.AckPropagation.Timeout = d
				}
			}
		}
	}
	errs = append(errs, validate.Struct(path, &s))
	errs = append(errs, staticRules(path, s))
	return s, validate.Join(errs...)
}

// staticRules are the seed's ack_mode "all" rules that the declaration alone
// decides; the one that depends on the wiring (a broadcast-only topic) is
// checked by Resolve.
func staticRules(path string, s TopicSpec) error {
	if s.Policies.Broadcast.AckMode != "all" {
		return nil
	}
	field := path + ".policies.broadcast.ack_mode"
	var errs []error
	if s.Policies.AckPropagation.Mode != "auto" {
		errs = append(errs, validate.Field(field, "ack_mode_all",
			"all requires policies.ack_propagation.mode auto, not "+s.Policies.AckPropagation.Mode))
	}
	if s.Policies.Broadcast.OnLag != "disconnect" {
		errs = append(errs, validate.Field(field, "ack_mode_all",
			"all requires policies.broadcast.on_lag disconnect, not "+s.Policies.Broadcast.OnLag))
	}
	if s.ImplSelection == ImplForceMixed {
		errs = append(errs, validate.Field(field, "ack_mode_all",
			"all requires a broadcast-only topic, but impl_selection force_mixed makes it mixed"))
	}
	return validate.Join(errs...)
}

func setString(dst *string, v *string) {
	if v != nil {
		*dst = *v
	}
}

func setInt(dst *int, v *int) {
	if v != nil {
		*dst = *v
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// checkNode walks the YAML tree against the raw type t and reports unknown
// keys and values of the wrong kind with their YAML path. A null value is
// an absent one.
func checkNode(path string, n *yaml.Node, t reflect.Type, errs *[]error) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	at := func(p string) string {
		if p == "" {
			return "document"
		}
		return p
	}
	join := func(key string) string {
		if path == "" {
			return key
		}
		return path + "." + key
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			*errs = append(*errs, validate.Field(at(path), "mapping", fmt.Sprintf("must be a mapping (line %d)", n.Line)))
			return
		}
		known := make(map[string]reflect.StructField, t.NumField())
		names := make([]string, 0, t.NumField())
		for i := range t.NumField() {
			f := t.Field(i)
			key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			known[key] = f
			names = append(names, key)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Tag == "!!merge" {
				// "<<: *anchor" (or a list of them) merges the anchored
				// mappings' keys here: check them at this path.
				merged := []*yaml.Node{v}
				if v.Kind == yaml.SequenceNode {
					merged = v.Content
				}
				for _, m := range merged {
					checkNode(path, m, t, errs)
				}
				continue
			}
			f, ok := known[k.Value]
			if !ok {
				*errs = append(*errs, validate.Field(join(k.Value), "known",
					fmt.Sprintf("is not a known key (line %d); %s accepts: %s", k.Line, at(path), strings.Join(names, ", "))))
				continue
			}
			checkNode(join(k.Value), v, f.Type, errs)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			*errs = append(*errs, validate.Field(at(path), "mapping", fmt.Sprintf("must be a mapping (line %d)", n.Line)))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			checkNode(join(n.Content[i].Value), n.Content[i+1], t.Elem(), errs)
		}
	case reflect.Int:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			*errs = append(*errs, validate.Field(at(path), "integer",
				fmt.Sprintf("must be an integer, not %q (line %d)", n.Value, n.Line)))
		}
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			*errs = append(*errs, validate.Field(at(path), "scalar", fmt.Sprintf("must be a single value (line %d)", n.Line)))
		}
	}
}
