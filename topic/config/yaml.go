package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/internal/quote"
	"github.com/boulevard-go/boulevard/validate"
)

// ErrSyntax is wrapped by the error Parse returns for a document that is not
// well-formed YAML. Apart from ErrTooLarge and ErrTooManyAliases, every
// other problem Parse finds is a validate.Errors value (wrapping
// validate.ErrInvalid) naming the YAML path.
var ErrSyntax = errors.New("config: malformed YAML")

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
	// Connections are the declared broker connections, by name
	// (connections.<name>), for topics on the kafka and pulsar backends.
	Connections map[string]ConnectionSpec
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
	// Backend names the backend that implements the topic: "in_memory",
	// "kafka", "pulsar", or the Name of a backend passed to Build. Default
	// defaults.backend, else "in_memory".
	Backend string `validate:"required"`
	// Connection names the entry of connections that a kafka or pulsar
	// topic reaches its broker through. Default defaults.connection, except
	// on an in_memory topic, which has none (and may not name one).
	Connection string
	// ImplSelection is "auto" (default: the mode is inferred from how the
	// topic is subscribed to) or "force_mixed" (always topic.Mixed).
	ImplSelection string `name:"impl_selection" validate:"oneof=auto force_mixed"`
	// Policies are the topic's policies.
	Policies PolicySpec
}

// PolicySpec is policies.* of a topic declaration.
type PolicySpec struct {
	// Balanced governs the consumer-group queues.
	Balanced BalancedSpec
	// Broadcast governs the broadcast ring.
	Broadcast BroadcastSpec
	// AckPropagation governs tracked publishing across the topic.
	AckPropagation AckPropagationSpec `name:"ack_propagation"`
}

// BalancedSpec is policies.balanced.
type BalancedSpec struct {
	// QueueCapacity is the capacity of each consumer group's queue, at
	// most topic.MaxCapacity (1048576). Default 1024.
	QueueCapacity int `name:"queue_capacity" validate:"gte=1,lte=1048576"`
	// OnFull is what a publish does when a group's queue is full: "block"
	// (default) waits, "drop_newest" drops the message being published.
	// A publisher may override it with queue_on_full.
	OnFull string `name:"on_full" validate:"oneof=block drop_newest"`
}

// BroadcastSpec is policies.broadcast.
type BroadcastSpec struct {
	// QueueCapacity is the size of the broadcast ring, at most
	// topic.MaxCapacity (1048576). Default 4096.
	QueueCapacity int `name:"queue_capacity" validate:"gte=1,lte=1048576"`
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
	Mode string `validate:"oneof=disabled auto"`
	// MaxInFlight bounds a publisher's unresolved tracked publishes, at
	// most topic.MaxInFlightLimit (1048576). Default 1024.
	MaxInFlight int `name:"max_in_flight" validate:"gte=1,lte=1048576"`
	// Timeout is how long a tracked publish may stay unresolved before it
	// resolves as timed out, written like "30s" or "1m30s"; at least 1ms,
	// at most topic.MaxTimeout (24h). Default 30s.
	Timeout time.Duration `validate:"gte=1ms,lte=24h"`
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
	Defaults    *rawDefaults              `yaml:"defaults"`
	Connections map[string]*rawConnection `yaml:"connections"`
	Topics      map[string]*rawTopic      `yaml:"topics"`
	Groups      map[string]*rawGroup      `yaml:"groups"`
}

type rawGroup struct {
	Topics map[string]*rawTopic `yaml:"topics"`
}

type rawTopic struct {
	Backend       *string      `yaml:"backend"`
	Connection    *string      `yaml:"connection"`
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

// Limits on what Parse reads, so that any document, however hostile, costs
// bounded time and memory and gets a bounded error.
const (
	// MaxDocumentSize is the largest document Parse accepts: 1 MiB
	// (1048576 bytes). A larger one fails with ErrTooLarge.
	MaxDocumentSize = 1 << 20
	// MaxAliasNodes is how many nodes a document may reach through aliases
	// (*name) and merge keys (<<: *name), counting every node of an
	// aliased value each time it is used: 20000, enough for each of
	// MaxTopics declarations to be written whole through an alias. Past
	// it, Parse fails with ErrTooManyAliases before decoding anything.
	MaxAliasNodes = 20000
	// MaxMappingKeys is how many keys one mapping of a document may hold:
	// 1000.
	MaxMappingKeys = 1000
	// MaxTopics is how many topics a document may declare, global and
	// group-scoped together (a declaration reached through an alias
	// counts each time): 1000.
	MaxTopics = 1000
	// MaxTotalCapacity is the largest sum, over every topic a document
	// declares, of its balanced and broadcast queue_capacity: 8388608
	// (1 << 23) messages. Each value is bounded by topic.MaxCapacity; this
	// bounds the document as a whole, since the in-memory backend sets
	// aside a queue's capacity when the queue is made. A balanced topic
	// makes one queue per consumer group, so count that when sizing.
	MaxTotalCapacity = 1 << 23
	// MaxListedErrors is how many problems an error of Parse or Resolve
	// lists; the rest are counted in a last entry, "and N more".
	MaxListedErrors = 20
)

// ErrTooLarge is wrapped by the error Parse returns for a document larger
// than MaxDocumentSize.
var ErrTooLarge = errors.New("config: document too large")

// ErrTooManyAliases is wrapped by the error Parse returns for a document
// whose aliases and merge keys reach more than MaxAliasNodes nodes, or
// refer to a value that contains them.
var ErrTooManyAliases = errors.New("config: too many alias expansions")

// Parse reads a topic document. An empty document declares no topics.
//
// It rejects a document larger than MaxDocumentSize (ErrTooLarge), one
// whose aliases expand past MaxAliasNodes (ErrTooManyAliases), malformed
// YAML (ErrSyntax), and then, as one validate.Errors listing all of them
// (at most MaxListedErrors, then "and N more"): a mapping of more than
// MaxMappingKeys keys, more than MaxTopics topic declarations, a key
// repeated in one mapping, unknown keys and values of the wrong kind
// (naming the key's YAML path and line), names that are not valid topic or
// group names (1 to 249 ASCII letters, digits, '.', '_' or '-'; see
// topic.NameRule), and every value that breaks a rule, for example
//
//	topics.ingress.policies.balanced.queue_capacity must be ≥ 1
//	topics.audit.policies.broadcast.ack_mode all requires policies.ack_propagation.mode auto, not disabled
//
// A string of the document that an error repeats (a name, a key, a value)
// is printed as is only when it is a valid name or one of the setting's
// fixed words; anything else is quoted and escaped, and cut after 64 bytes
// with its length, so an error never holds a control character or a line
// break from the input.
//
// The rules that depend on how pipelines use a topic (its mode) are checked
// by Resolve.
func Parse(data []byte) (*Config, error) {
	if len(data) > MaxDocumentSize {
		return nil, fmt.Errorf("%w: %d bytes, more than the limit of %d bytes (1 MiB)", ErrTooLarge, len(data), MaxDocumentSize)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSyntax, foreignError{err})
	}
	w := walker{active: map[*yaml.Node]bool{}}
	if len(root.Content) > 0 {
		w.check("", root.Content[0], reflect.TypeFor[rawDocument]())
	}
	if w.over != "" {
		return nil, fmt.Errorf("%w: %s", ErrTooManyAliases, w.over)
	}
	if err := w.problems.err(); err != nil {
		return nil, err
	}
	// The walk above names the path of every unknown key; strict decoding
	// is the backstop that guarantees no key is silently ignored. The walk
	// followed every alias the decoder follows, so its work is bounded too.
	var raw rawDocument
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&raw); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: %w", validate.ErrInvalid, foreignError{err})
	}
	cfg := &Config{Connections: map[string]ConnectionSpec{}, Topics: map[string]TopicSpec{}, Groups: map[string]GroupSpec{}}
	var errs problems
	if len(raw.Connections) > MaxConnections {
		errs.add(validate.Field("connections", "max",
			fmt.Sprintf("declares %d connections, more than the limit of %d", len(raw.Connections), MaxConnections)))
	}
	for _, name := range sortedKeys(raw.Connections) {
		path := "connections." + topic.SafeName(name)
		errs.add(checkName(path, name))
		c, err := buildConnection(path, name, raw.Connections[name])
		errs.add(err)
		cfg.Connections[name] = c
	}
	base := DefaultTopicSpec()
	if d := raw.Defaults; d != nil {
		setString(&base.Backend, d.Backend)
		setString(&base.Connection, d.Connection)
	}
	for _, name := range sortedKeys(raw.Topics) {
		path := "topics." + topic.SafeName(name)
		errs.add(checkName(path, name))
		spec, err := buildSpec(path, base, raw.Topics[name])
		errs.add(err)
		cfg.Topics[name] = spec
	}
	for _, g := range sortedKeys(raw.Groups) {
		gpath := "groups." + topic.SafeName(g)
		errs.add(checkName(gpath, g))
		gs := GroupSpec{Topics: map[string]TopicSpec{}}
		if rg := raw.Groups[g]; rg != nil {
			for _, name := range sortedKeys(rg.Topics) {
				path := gpath + ".topics." + topic.SafeName(name)
				errs.add(checkName(path, name))
				spec, err := buildSpec(path, base, rg.Topics[name])
				errs.add(err)
				gs.Topics[name] = spec
			}
		}
		cfg.Groups[g] = gs
	}
	if total := cfg.totalCapacity(); total > MaxTotalCapacity {
		errs.add(validate.Field("topics", "lte", fmt.Sprintf(
			"queue capacities add up to %d messages over all topics, more than the limit of %d", total, MaxTotalCapacity)))
	}
	if errs.err() == nil {
		errs.add(checkConnections(cfg))
	}
	if err := errs.err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// totalCapacity adds up the balanced and broadcast queue capacities of every
// topic of c, global and group-scoped.
func (c *Config) totalCapacity() int {
	total := 0
	add := func(s TopicSpec) {
		total += s.Policies.Balanced.QueueCapacity + s.Policies.Broadcast.QueueCapacity
	}
	for _, s := range c.Topics {
		add(s)
	}
	for _, g := range c.Groups {
		for _, s := range g.Topics {
			add(s)
		}
	}
	return total
}

// foreignError carries an error of the YAML library with its message made
// safe to print (quote.Text): no line breaks, no control characters,
// bounded length. Unwrap returns the original.
type foreignError struct{ err error }

func (e foreignError) Error() string { return quote.Text(e.err.Error()) }

func (e foreignError) Unwrap() error { return e.err }

// moreRule is the Rule of the last entry of a capped list, "and N more";
// its Param is N.
const moreRule = "more"

// problems collects the field errors of a document, keeping the first
// MaxListedErrors and counting the rest.
type problems struct {
	list validate.Errors
	more int
}

// add records every field error err holds (nil is nothing).
func (p *problems) add(err error) {
	if err == nil {
		return
	}
	var es validate.Errors
	if !errors.As(validate.Join(err), &es) {
		return
	}
	for _, e := range es {
		if e.Rule == moreRule {
			// a list capped before: count what it left out
			n, _ := strconv.Atoi(e.Param)
			p.more += n
			continue
		}
		if len(p.list) < MaxListedErrors {
			p.list = append(p.list, e)
		} else {
			p.more++
		}
	}
}

// err returns the collected errors as one validate.Errors, ending with
// "and N more" when some were left out, or nil.
func (p *problems) err() error {
	if len(p.list) == 0 && p.more == 0 {
		return nil
	}
	out := slices.Clone(p.list)
	if p.more > 0 {
		out = append(out, &validate.FieldError{Rule: moreRule, Param: strconv.Itoa(p.more), Message: fmt.Sprintf("and %d more", p.more)})
	}
	return out
}

// checkName rejects names that cannot be topic or group names: empty ones,
// ones holding "/" (which separates a group from its topic in the broker's
// names) and any other outside the character set of topic.GroupName.
func checkName(path, name string) error {
	switch {
	case name == "":
		return validate.Field(path, "required", "must have a non-empty name")
	case strings.Contains(name, "/"):
		return validate.Field(path, "excludes", fmt.Sprintf("name %s must not contain \"/\"", quote.Value(name)))
	}
	var ne *topic.NameError
	if err := topic.GroupName(name).Validate(); errors.As(err, &ne) {
		return validate.Field(path, "name", "name "+ne.Reason)
	}
	return nil
}

// buildSpec fills the defaults (base) into a raw declaration and validates it.
func buildSpec(path string, base TopicSpec, r *rawTopic) (TopicSpec, error) {
	s := base
	var errs []error
	if r != nil {
		setString(&s.Backend, r.Backend)
		setString(&s.Connection, r.Connection)
	}
	if s.Backend == DefaultBackend && (r == nil || r.Connection == nil) {
		// defaults.connection is for the kafka and pulsar topics that
		// name none: an in-memory topic has none unless it names one
		// (which checkConnections refuses).
		s.Connection = ""
	}
	if r != nil {
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
							"must be a duration such as 30s or 1m30s, not "+quote.Value(*a.Timeout)))
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
			"all requires policies.ack_propagation.mode auto, not "+known(s.Policies.AckPropagation.Mode, topic.ParsePropagationMode)))
	}
	if s.Policies.Broadcast.OnLag != "disconnect" {
		errs = append(errs, validate.Field(field, "ack_mode_all",
			"all requires policies.broadcast.on_lag disconnect, not "+known(s.Policies.Broadcast.OnLag, topic.ParseOnLag)))
	}
	if s.ImplSelection == ImplForceMixed {
		errs = append(errs, validate.Field(field, "ack_mode_all",
			"all requires a broadcast-only topic, but impl_selection force_mixed makes it mixed"))
	}
	return validate.Join(errs...)
}

// known returns v as is when parse accepts it (one of the fixed words of
// the setting) and quoted and escaped otherwise.
func known[E any](v string, parse func(string) (E, error)) string {
	if _, err := parse(v); err == nil {
		return v
	}
	return quote.Value(v)
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

// walker checks the YAML tree against the raw types before anything is
// decoded: it reports unknown keys and values of the wrong kind with their
// YAML path, and bounds the work aliases can cause.
type walker struct {
	problems
	aliased int                 // nodes reached through an alias so far
	depth   int                 // how many aliases the current node is reached through
	active  map[*yaml.Node]bool // aliased values being walked: a use inside one is a cycle
	over    string              // why the walk stopped: MaxAliasNodes exceeded, or a cycle
	topics  int                 // topic declarations seen, aliases included
	tooMany bool                // MaxTopics exceeded (reported once)
}

// check walks n against the raw type t. A null value is an absent one.
func (w *walker) check(path string, n *yaml.Node, t reflect.Type) {
	if w.over != "" {
		return
	}
	if w.depth > 0 {
		if w.aliased++; w.aliased > MaxAliasNodes {
			w.over = fmt.Sprintf("aliases and merge keys reach more than %d nodes", MaxAliasNodes)
			return
		}
	}
	if n.Kind == yaml.AliasNode {
		target := n.Alias
		if target == nil {
			return
		}
		if w.active[target] {
			// An anchor used inside its own value would expand forever.
			w.over = fmt.Sprintf("alias *%s (line %d) is used inside its own value", n.Value, n.Line)
			return
		}
		w.active[target] = true
		w.depth++
		w.check(path, target, t)
		w.depth--
		delete(w.active, target)
		return
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
			return topic.SafeName(key)
		}
		return path + "." + topic.SafeName(key)
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			w.add(validate.Field(at(path), "mapping", fmt.Sprintf("must be a mapping (line %d)", n.Line)))
			return
		}
		if !w.entries(path, n) {
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
					w.check(path, m, t)
				}
				continue
			}
			key, ok := w.key(path, k)
			if !ok {
				continue
			}
			f, ok := known[key]
			if !ok {
				w.add(validate.Field(join(key), "known",
					fmt.Sprintf("is not a known key (line %d); %s accepts: %s", k.Line, at(path), strings.Join(names, ", "))))
				continue
			}
			w.check(join(key), v, f.Type)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			w.add(validate.Field(at(path), "mapping", fmt.Sprintf("must be a mapping (line %d)", n.Line)))
			return
		}
		if !w.entries(path, n) {
			return
		}
		if t.Elem() == reflect.TypeFor[*rawTopic]() {
			if w.topics += len(n.Content) / 2; w.topics > MaxTopics && !w.tooMany {
				w.tooMany = true
				w.add(validate.Field(at(path), "max_topics",
					fmt.Sprintf("brings the document to more than %d topic declarations (line %d)", MaxTopics, n.Line)))
			}
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if key, ok := w.key(path, n.Content[i]); ok {
				w.check(join(key), n.Content[i+1], t.Elem())
			}
		}
	case reflect.Int:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			w.add(validate.Field(at(path), "integer",
				fmt.Sprintf("must be an integer, not %s (line %d)", quote.Value(n.Value), n.Line)))
		}
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			w.add(validate.Field(at(path), "scalar", fmt.Sprintf("must be a single value (line %d)", n.Line)))
		}
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			w.add(validate.Field(at(path), "boolean",
				fmt.Sprintf("must be true or false, not %s (line %d)", quote.Value(n.Value), n.Line)))
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			w.add(validate.Field(at(path), "sequence", fmt.Sprintf("must be a list (line %d)", n.Line)))
			return
		}
		if len(n.Content) > MaxMappingKeys {
			w.add(validate.Field(at(path), "max_items",
				fmt.Sprintf("has %d items, more than %d (line %d)", len(n.Content), MaxMappingKeys, n.Line)))
			return
		}
		for i, item := range n.Content {
			w.check(path+"."+strconv.Itoa(i), item, t.Elem())
		}
	}
}

// entries checks a mapping's size and that no key repeats, reporting what
// it finds; it returns false when the mapping is too large to walk. This
// keeps the decoder, which compares every pair of keys of a mapping, from
// quadratic work.
func (w *walker) entries(path string, n *yaml.Node) bool {
	where := path
	if where == "" {
		where = "document"
	}
	if len(n.Content)/2 > MaxMappingKeys {
		w.add(validate.Field(where, "max_keys",
			fmt.Sprintf("has %d keys, more than %d (line %d)", len(n.Content)/2, MaxMappingKeys, n.Line)))
		return false
	}
	seen := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind == yaml.AliasNode && k.Alias != nil {
			k = k.Alias
		}
		if k.Kind != yaml.ScalarNode {
			continue // reported by key
		}
		if line, dup := seen[k.Value]; dup {
			key := topic.SafeName(k.Value)
			if path != "" {
				key = path + "." + key
			}
			w.add(validate.Field(key, "unique", fmt.Sprintf("is repeated (lines %d and %d)", line, n.Content[i].Line)))
			continue
		}
		seen[k.Value] = n.Content[i].Line
	}
	return true
}

// key returns the text of a mapping key, following an alias to a scalar;
// a key that is a mapping or a sequence is reported.
func (w *walker) key(path string, k *yaml.Node) (string, bool) {
	if k.Kind == yaml.AliasNode && k.Alias != nil {
		k = k.Alias
	}
	if k.Kind != yaml.ScalarNode {
		where := path
		if where == "" {
			where = "document"
		}
		w.add(validate.Field(where, "key", fmt.Sprintf("has a key that is not a single value (line %d)", k.Line)))
		return "", false
	}
	return k.Value, true
}
