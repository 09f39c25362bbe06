package config

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/boulevard-go/boulevard/internal/liveset"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/internal/quote"
)

// TopicError names the declaration (by YAML path) that a creation-time
// failure, such as an unsupported backend capability, belongs to.
type TopicError struct {
	// Path is the declaration's YAML path, for example "topics.ingress".
	Path string
	// Err is the cause, for example a *topic.UnsupportedError.
	Err error
}

// Error returns "<path>: <cause>". A path that holds a control character
// or invalid UTF-8 (possible only in a Plan built by hand) is quoted and
// escaped.
func (e *TopicError) Error() string {
	path := e.Path
	if quote.Text(path) != path {
		path = quote.Value(path)
	}
	return path + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *TopicError) Unwrap() error { return e.Err }

// joinedError is several errors reported together on one line.
type joinedError []error

// Error joins the first MaxListedErrors messages with "; " and counts the
// rest.
func (e joinedError) Error() string {
	parts := make([]string, 0, min(len(e), MaxListedErrors+1))
	for i, err := range e {
		if i == MaxListedErrors {
			parts = append(parts, fmt.Sprintf("and %d more", len(e)-i))
			break
		}
		parts = append(parts, err.Error())
	}
	return strings.Join(parts, "; ")
}

// Unwrap returns every error.
func (e joinedError) Unwrap() []error { return e }

// Subscription is one of a pipeline's subscriber bindings, ready for a topic
// source.
type Subscription[T any] struct {
	// Alias is the name the pipeline used for the topic.
	Alias string
	// Binding is the pipeline's binding of the topic.
	Binding topic.Binding[T]
	// Mode is the subscription mode to subscribe with.
	Mode topic.SubscriptionMode
}

// Wired is the result of Build: the created topics and each pipeline's
// topic set.
type Wired[T any] struct {
	// Plan is the plan that was built.
	Plan *Plan
	// Topics are the created topics, by broker name.
	Topics map[topic.Name]*topic.Handle[T]

	sets      map[string]*topic.TopicSet[T]
	subs      map[string][]Subscription[T]
	connected []topic.Backend[T] // made by the Connector, closed by Close

	// closing closes Topics on a goroutine of its own, which Close waits
	// for within its context.
	closing liveset.Closing
}

// BuildOptions are the optional inputs of [BuildContext].
type BuildOptions[T any] struct {
	// Backends are backends the document can name in backend:, by their
	// Name, besides the built-in "in_memory". A backend named "kafka" or
	// "pulsar" cannot be named so: those names mean a connection, whose
	// backend Connect makes (or returns, for one the program made).
	Backends []topic.Backend[T]
	// Connect makes the backend of each connection a kafka or pulsar topic
	// uses. Required when the plan has such topics. A panic in it is the
	// connection's error, wrapping a *message.PanicError (the backends
	// made for the other connections are then closed).
	Connect Connector[T]
}

// WithDefaults returns o unchanged: no field has a default (nil Backends
// means only "in_memory"; a nil Connect is an error only for a plan that
// needs it).
func (o BuildOptions[T]) WithDefaults() BuildOptions[T] { return o }

// Validate returns nil: whether Connect is needed depends on the plan, and
// BuildContext reports a missing one for each topic that needs it; a nil
// entry of Backends is skipped.
func (o BuildOptions[T]) Validate() error { return nil }

// Close closes every topic Build created, all at once, then every backend
// the Connector made (those with a Close(context.Context) error method),
// all at once and each within ctx, and returns their errors joined.
//
// It returns by ctx's deadline. topic.Handle.Close takes no context: when
// ctx ends before the topics are closed, Close returns an error wrapping
// ctx.Err() and closes the backends with ctx all the same, so that a
// backend that bounds its closing by its context (kafkatopic cuts its
// connections, pulsartopic leaves the rest in the background) lets the
// topics' closing, which goes on in the background, end soon after
// instead of waiting for brokers that do not answer. Idempotent: a later
// call waits, within its own ctx, for the same closing of the topics and
// closes the backends again (their Close is idempotent). Close of a nil
// Wired (what a failed Build returns) returns nil.
// A nil ctx returns topic.ErrNilContext and leaves the wiring as it was,
// open: call Close again with a context.
func (w *Wired[T]) Close(ctx context.Context) error {
	if ctx == nil {
		return topic.ErrNilContext
	}
	if w == nil {
		return nil
	}
	var errs []error
	if err := liveset.Await(ctx, w.closing.Start(w.closeTopics), nil); err != nil {
		errs = append(errs, fmt.Errorf("config: closing the topics: %w", err))
	}
	var closers []interface{ Close(context.Context) error }
	for _, b := range w.connected {
		if c, ok := b.(interface{ Close(context.Context) error }); ok {
			closers = append(closers, c)
		}
	}
	errs = append(errs, liveset.CloseEach(closers, func(c interface{ Close(context.Context) error }) error {
		return c.Close(ctx)
	}))
	return errors.Join(errs...)
}

// closeTopics closes every topic of w.Topics, each on its own goroutine,
// and returns once all are closed.
func (w *Wired[T]) closeTopics() {
	hs := make([]*topic.Handle[T], 0, len(w.Topics))
	for _, h := range w.Topics {
		hs = append(hs, h)
	}
	_ = liveset.CloseEach(hs, func(h *topic.Handle[T]) error {
		h.Close()
		return nil
	})
}

// TopicSet returns the topic set of the pipeline named pipeline (every topic it
// subscribes to or publishes into, under the name it used), or nil for a
// pipeline that is not in the wiring (or a nil Wired).
func (w *Wired[T]) TopicSet(pipeline string) *topic.TopicSet[T] {
	if w == nil {
		return nil
	}
	return w.sets[pipeline]
}

// Subscriptions returns the pipeline's subscriptions in wiring order (none
// for a nil Wired).
func (w *Wired[T]) Subscriptions(pipeline string) []Subscription[T] {
	if w == nil {
		return nil
	}
	return append([]Subscription[T](nil), w.subs[pipeline]...)
}

// Publisher returns the pipeline's binding for a topic it publishes into,
// under the name it used in the wiring; false for a nil Wired.
func (w *Wired[T]) Publisher(pipeline, alias string) (topic.Binding[T], bool) {
	s := w.TopicSet(pipeline)
	if s == nil {
		return topic.Binding[T]{}, false
	}
	return s.Get(alias)
}

// Build creates the plan's topics on broker and binds them to the pipelines.
//
// Every topic is first checked against its backend: the backend named by
// its declaration is looked up among backends (by Name), then among the
// built-in ones (topic.BackendByName: "in_memory"); a missing backend, or
// one whose Capabilities lack the topic's mode or a policy it uses, fails
// with a *TopicError wrapping the *topic.UnsupportedError
// (topic.ErrUnsupportedBackend, ErrUnsupportedMode, ErrUnsupportedPolicy).
// All such problems are reported together, in one error whose message
// joins theirs with "; " (at most MaxListedErrors, then "and N more") and
// whose Unwrap returns all of them; nothing is created. Then all
// topics are created at once with topic.Broker.CreateTopics: if one cannot
// be (a topic of that name exists already), none is.
//
// It is [BuildContext] with context.Background() and backends: only the
// backends' own timeouts bound declaring the topics (see
// topic.Broker.CreateTopics).
func Build[T any](broker *topic.Broker[T], plan *Plan, backends ...topic.Backend[T]) (*Wired[T], error) {
	return BuildContext(context.Background(), broker, plan, BuildOptions[T]{Backends: backends})
}

// BuildContext is [Build] for plans whose topics may live on Kafka or
// Pulsar: a topic with a connection gets its backend from opts.Connect,
// called once per connection (its Name must be the connection's kind, else
// the error wraps ErrWrongBackend), and ctx bounds connecting and declaring
// the topics. If anything fails, the
// backends already made are closed. [Wired.Close] closes them later.
// A nil ctx returns topic.ErrNilContext, nothing built.
func BuildContext[T any](ctx context.Context, broker *topic.Broker[T], plan *Plan, opts BuildOptions[T]) (w *Wired[T], err error) {
	if ctx == nil {
		return nil, topic.ErrNilContext
	}
	if broker == nil || plan == nil {
		return nil, errors.New("config: Build needs a broker and a plan")
	}
	byName := map[string]topic.Backend[T]{}
	for _, b := range opts.Backends {
		if b != nil {
			byName[b.Name()] = b
		}
	}
	connected := map[string]topic.Backend[T]{}
	var made []topic.Backend[T]
	defer func() {
		if err != nil {
			(&Wired[T]{connected: made}).Close(context.WithoutCancel(ctx))
		}
	}()
	decls := make([]topic.Declaration[T], 0, len(plan.Topics))
	var errs []error
	for _, tp := range plan.Topics {
		if tp.Conn != nil {
			b, cerr := connect(ctx, opts.Connect, *tp.Conn, connected, &made)
			if cerr != nil {
				errs = append(errs, &TopicError{Path: tp.Path + ".connection", Err: cerr})
				continue
			}
			if err := topic.CheckCapabilities(b.Name(), b.Capabilities(), tp.Options); err != nil {
				errs = append(errs, &TopicError{Path: tp.Path, Err: err})
				continue
			}
			decls = append(decls, topic.Declaration[T]{Name: tp.Name, Options: tp.Options, Backend: b})
			continue
		}
		b, ok := byName[tp.Backend]
		if !ok {
			var err error
			if b, err = topic.BackendByName[T](tp.Backend); err != nil {
				errs = append(errs, &TopicError{Path: tp.Path + ".backend", Err: err})
				continue
			}
		}
		if err := topic.CheckCapabilities(b.Name(), b.Capabilities(), tp.Options); err != nil {
			errs = append(errs, &TopicError{Path: tp.Path, Err: err})
			continue
		}
		decls = append(decls, topic.Declaration[T]{Name: tp.Name, Options: tp.Options, Backend: b})
	}
	if len(errs) > 0 {
		return nil, joinedError(errs)
	}
	handles, err := broker.CreateTopicsContext(ctx, decls)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	w = &Wired[T]{
		Plan:      plan,
		Topics:    make(map[topic.Name]*topic.Handle[T], len(handles)),
		sets:      make(map[string]*topic.TopicSet[T], len(plan.Pipelines)),
		subs:      make(map[string][]Subscription[T], len(plan.Pipelines)),
		connected: made,
	}
	for _, h := range handles {
		w.Topics[h.Name()] = h
	}
	for _, pp := range plan.Pipelines {
		set := topic.NewTopicSet[T]()
		for _, bp := range pp.Bindings {
			b := topic.Binding[T]{Handle: w.Topics[bp.Topic], OnFull: bp.OnFull, AckPropagation: bp.AckPropagation}
			if err := set.Bind(bp.Alias, b); err != nil {
				// Resolve rejected duplicate aliases; a hand-built plan may
				// not have been resolved. Undo the creation: all or none.
				for _, h := range handles {
					broker.Remove(h.Name())
				}
				return nil, fmt.Errorf("config: pipeline %s: %w", topic.SafeName(pp.Name), err)
			}
			if bp.Role == Subscriber {
				w.subs[pp.Name] = append(w.subs[pp.Name], Subscription[T]{Alias: bp.Alias, Binding: b, Mode: bp.SubscriptionMode()})
			}
		}
		w.sets[pp.Name] = set
	}
	return w, nil
}

// Load parses a topic document, resolves the wiring against it and builds
// the topics on broker: Parse, Resolve and Build in one call.
// It is [LoadContext] with context.Background(), bounded as Build is.
func Load[T any](data []byte, wiring Wiring, broker *topic.Broker[T], backends ...topic.Backend[T]) (*Wired[T], error) {
	return LoadContext(context.Background(), data, wiring, broker, BuildOptions[T]{Backends: backends})
}

// LoadContext is [Load] with [BuildContext]: for documents whose topics
// live on Kafka or Pulsar.
// A nil ctx returns topic.ErrNilContext, nothing built.
func LoadContext[T any](ctx context.Context, data []byte, wiring Wiring, broker *topic.Broker[T], opts BuildOptions[T]) (*Wired[T], error) {
	if ctx == nil {
		return nil, topic.ErrNilContext
	}
	cfg, err := Parse(data)
	if err != nil {
		return nil, err
	}
	plan, err := Resolve(cfg, wiring)
	if err != nil {
		return nil, err
	}
	return BuildContext(ctx, broker, plan, opts)
}

// ErrNoConnector is wrapped by the error of BuildContext when a topic
// needs a connection but BuildOptions.Connect is nil.
var ErrNoConnector = errors.New("config: no connector for kafka or pulsar topics (set BuildOptions.Connect)")

// ErrWrongBackend is wrapped by the error of BuildContext when
// BuildOptions.Connect made, for a connection, a backend whose Name is not
// the connection's kind (or none: a nil backend and a nil error). That
// backend is closed.
var ErrWrongBackend = errors.New("config: the connector made a backend of the wrong kind")

// connect returns the backend of connection c, making it with fn the
// first time. A backend fn made of another kind than c's is closed: no
// Wired holds it to close it later.
func connect[T any](ctx context.Context, fn Connector[T], c ConnectionSpec, cache map[string]topic.Backend[T], made *[]topic.Backend[T]) (topic.Backend[T], error) {
	if b, ok := cache[c.Name]; ok {
		return b, nil
	}
	if fn == nil {
		return nil, ErrNoConnector
	}
	b, err := callConnector(ctx, fn, c)
	if err != nil {
		return nil, err
	}
	if b == nil || b.Name() != c.Kind {
		name := "nil"
		if b != nil {
			name = quote.Value(b.Name())
			if cl, ok := b.(interface{ Close(context.Context) error }); ok {
				_ = cl.Close(context.WithoutCancel(ctx))
			}
		}
		return nil, fmt.Errorf("%w: %s for a %s connection", ErrWrongBackend, name, c.Kind)
	}
	cache[c.Name] = b
	*made = append(*made, b)
	return b, nil
}

// callConnector calls fn, returning its panic as an error wrapping a
// *message.PanicError: the connection's error, so that the backends made
// for the connections before it are closed.
func callConnector[T any](ctx context.Context, fn Connector[T], c ConnectionSpec) (b topic.Backend[T], err error) {
	defer message.Recover(&err)
	return fn(ctx, c)
}
