package pulsar

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	neturl "net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/boulevard-go/boulevard/internal/redact"
	"github.com/boulevard-go/boulevard/internal/repeatlog"
)

// Defaults ClientDefaults gives the pulsar-client-go options that bound how
// long a broker that cannot be reached takes to show. With them a subscribe
// fails within about DefaultOperationTimeout whether nothing listens at the
// address (the client retries the lookup until the operation timeout) or a
// listener accepts the connection and never answers (the client's handshake
// waits KeepAliveInterval), so the stage's first failure, which the
// producer stage logs at WARN with the broker address and the cause, comes
// within 10 s of the start.
const (
	// DefaultConnectionTimeout bounds one TCP connect. pulsar-client-go's
	// own default is no bound (the operating system's).
	DefaultConnectionTimeout = 5 * time.Second
	// DefaultOperationTimeout bounds a lookup, subscribe or close, retries
	// included. pulsar-client-go's own default is 30 s.
	DefaultOperationTimeout = 7 * time.Second
	// DefaultKeepAliveInterval is the ping interval, and also the bound
	// pulsar-client-go puts on the connection handshake. A connection that
	// receives nothing for two intervals is closed as stale.
	// pulsar-client-go's own default is 30 s.
	DefaultKeepAliveInterval = 7 * time.Second
)

// ClientDefaults returns o with the connection, operation and keep-alive
// timeouts that are zero set to DefaultConnectionTimeout,
// DefaultOperationTimeout and DefaultKeepAliveInterval, and, when o.Logger
// is nil, pulsar-client-go's logs sent to logger through ClientLogger (a
// nil logger means slog.Default()). Values the caller set are kept.
func ClientDefaults(o pulsar.ClientOptions, logger *slog.Logger) pulsar.ClientOptions {
	if o.ConnectionTimeout == 0 {
		o.ConnectionTimeout = DefaultConnectionTimeout
	}
	if o.OperationTimeout == 0 {
		o.OperationTimeout = DefaultOperationTimeout
	}
	if o.KeepAliveInterval == 0 {
		o.KeepAliveInterval = DefaultKeepAliveInterval
	}
	if o.Logger == nil {
		o.Logger = ClientLogger(logger)
	}
	return o
}

// ClientDefaultsWithin returns o with each of its connection, operation
// and keep-alive timeouts that is zero set to DefaultConnectionTimeout,
// DefaultOperationTimeout and DefaultKeepAliveInterval, or to a quarter
// of bound when that is shorter (at least a millisecond). Values the
// caller set are kept. With them the client gives up on a broker it
// cannot reach within bound (a lookup retries for an operation timeout;
// its last attempt dials for at most the connection timeout, waits at
// most a keep-alive interval for the handshake and an operation timeout
// for the answer), so that a caller that waits bound for a client call
// sees it return: the backends that make their own client pass it the
// bound their Close waits for a call under way.
func ClientDefaultsWithin(o pulsar.ClientOptions, bound time.Duration) pulsar.ClientOptions {
	q := max(bound/4, time.Millisecond)
	if o.ConnectionTimeout == 0 {
		o.ConnectionTimeout = min(DefaultConnectionTimeout, q)
	}
	if o.OperationTimeout == 0 {
		o.OperationTimeout = min(DefaultOperationTimeout, q)
	}
	if o.KeepAliveInterval == 0 {
		o.KeepAliveInterval = min(DefaultKeepAliveInterval, q)
	}
	return o
}

// Client is a pulsar-client-go client created by NewClient. It remembers
// the broker's service URL, with any user information redacted, so that
// the source's errors can name the broker. A zero Client (one NewClient
// did not make) refuses every call with ErrClientNotCreated, and its
// Close does nothing.
type Client struct {
	pulsar.Client
	url     string // redacted
	secrets redact.Secrets
	last    *lastFailure
	closes  *brokerCloses // the client's logger's (nil: the caller's logger)
}

// CreateProducer is pulsar-client-go's (pulsar.Client).
func (c *Client) CreateProducer(o pulsar.ProducerOptions) (pulsar.Producer, error) {
	if c.Client == nil {
		return nil, ErrClientNotCreated
	}
	return c.Client.CreateProducer(o)
}

// Subscribe is pulsar-client-go's (pulsar.Client).
func (c *Client) Subscribe(o pulsar.ConsumerOptions) (pulsar.Consumer, error) {
	if c.Client == nil {
		return nil, ErrClientNotCreated
	}
	return c.Client.Subscribe(o)
}

// CreateReader is pulsar-client-go's (pulsar.Client).
func (c *Client) CreateReader(o pulsar.ReaderOptions) (pulsar.Reader, error) {
	if c.Client == nil {
		return nil, ErrClientNotCreated
	}
	return c.Client.CreateReader(o)
}

// CreateTableView is pulsar-client-go's (pulsar.Client).
func (c *Client) CreateTableView(o pulsar.TableViewOptions) (pulsar.TableView, error) {
	if c.Client == nil {
		return nil, ErrClientNotCreated
	}
	return c.Client.CreateTableView(o)
}

// TopicPartitions is pulsar-client-go's (pulsar.Client).
func (c *Client) TopicPartitions(topic string) ([]string, error) {
	if c.Client == nil {
		return nil, ErrClientNotCreated
	}
	return c.Client.TopicPartitions(topic)
}

// NewTransaction is pulsar-client-go's (pulsar.Client).
func (c *Client) NewTransaction(d time.Duration) (pulsar.Transaction, error) {
	if c.Client == nil {
		return nil, ErrClientNotCreated
	}
	return c.Client.NewTransaction(d)
}

// Close is pulsar-client-go's (pulsar.Client); on a zero Client it does
// nothing. The client's logger then logs, as they came, the lines it held
// waiting for a consumer's own (see ClientLogger).
func (c *Client) Close() {
	if c.Client == nil {
		return
	}
	c.Client.Close()
	if c.closes != nil {
		c.closes.flush(context.Background())
	}
}

// lastFailure is the latest warning or error the client logged with an
// error attached (a refused connection, a handshake that timed out), or
// saying that a broker refused its handshake (refusedHandshake: a failed
// authentication): the cause a failed operation's own error ("connection
// error") leaves out.
type lastFailure struct {
	mu  sync.Mutex
	at  time.Time
	msg string
	// reconnects counts, per subscription a Source consumes (see
	// countReconnects), the client's failed attempts to reconnect a
	// consumer (failedReconnect lines). Those of other subscriptions (a
	// topic backend's, a broadcast subscriber's named at random) are not
	// counted: they would each keep an entry for the client's lifetime.
	reconnects map[string]int64
	// watches are the running stages' reconnection watches, by the name
	// of their consumers (see Source.consumerName).
	watches map[string]*reconnectWatch
	// connecting is the latest failure to connect to a broker (a
	// connection or its handshake that failed, a handshake the broker
	// refused), "" once the client has connected to a broker since;
	// disconnected says whether it is set.
	connecting   string
	disconnected atomic.Bool
}

// connectFailure reports whether msg, a client warning, says that a
// connection to a broker failed.
func connectFailure(msg string) bool {
	return msg == "Failed to connect to broker." || msg == "Failed to perform initial handshake" ||
		strings.HasPrefix(msg, refusedHandshake)
}

// connectedLine is the client's Info line for a connection to a broker
// made.
const connectedLine = "Connection is ready"

// setConnecting notes the client's latest failure to connect, "" for a
// connection made.
func (l *lastFailure) setConnecting(failure string) {
	l.mu.Lock()
	l.connecting = failure
	l.disconnected.Store(failure != "")
	l.mu.Unlock()
}

// failedReconnect is the error pulsar-client-go logs for each failed
// attempt to reconnect a consumer whose connection closed.
const failedReconnect = "Failed to create consumer at reconnect"

// countReconnects makes the client count the failed attempts to
// reconnect the consumers of subscription sub, from now on.
func (l *lastFailure) countReconnects(sub string) {
	l.mu.Lock()
	if l.reconnects == nil {
		l.reconnects = map[string]int64{}
	}
	if _, ok := l.reconnects[sub]; !ok {
		l.reconnects[sub] = 0
	}
	l.mu.Unlock()
}

// reconnectFailed counts a failed attempt to reconnect a consumer of
// subscription sub, when its attempts are counted (countReconnects).
func (l *lastFailure) reconnectFailed(sub string) {
	l.mu.Lock()
	if n, ok := l.reconnects[sub]; ok {
		l.reconnects[sub] = n + 1
	}
	l.mu.Unlock()
}

// watch registers w for the consumers named name until the returned
// function is called, which also ends w: a line handled at that moment
// (by a handler that looked w up just before) reports nothing to the
// stage once unwatch has returned.
func (l *lastFailure) watch(name string, w *reconnectWatch) (unwatch func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.watches == nil {
		l.watches = map[string]*reconnectWatch{}
	}
	l.watches[name] = w
	return func() {
		l.mu.Lock()
		if l.watches[name] == w {
			delete(l.watches, name)
		}
		l.mu.Unlock()
		w.end()
	}
}

// watchOf returns the watch of the consumers named name, nil when none.
func (l *lastFailure) watchOf(name string) *reconnectWatch {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.watches[name]
}

// reconnectedConsumer is the client's Info line for a consumer that
// reconnected to a broker.
const reconnectedConsumer = "Reconnected consumer to broker"

// closingConsumer begins the client's Info line for a consumer that
// closes ("Closing consumer=<id>"); its reconnection attempts have ended.
const closingConsumer = "Closing consumer="

// ReconnectFailuresToDegrade is how many attempts in a row one of a
// stage's consumers (a partition's, for a partitioned topic) must fail to
// reconnect to a broker before the source reports the stage degraded
// (producer.StateDegraded). A consumer whose broker hands its topic to
// another reconnects at its first or second attempt; two failures in a row
// say the broker is out of reach. Each attempt at a broker that is down
// fails once the client's OperationTimeout has passed (its lookup retries
// until then), and the client waits 100 ms, then 200 ms, between them:
// the stage is degraded about two operation timeouts after the connection
// closed, some 14 s with DefaultOperationTimeout.
const ReconnectFailuresToDegrade = 2

// Degrader is what Client.WatchReconnects reports to: the handle of a
// source's run (producer.RunHealth), or a topic subscriber's
// topic.ReachObserver.
type Degrader interface {
	Degrade(err error)
	Recovered()
}

// WatchReconnects reports to d whether the consumers named name (their
// ConsumerOptions.Name) can reconnect to a broker, until the returned
// unwatch is called: d.Degrade, with an error wrapping ErrReconnecting,
// once one of them has failed ReconnectFailuresToDegrade attempts in a
// row, and again at each later failed attempt; d.Recovered once each of
// those has reconnected or closed. The rule is the Pulsar source's: it
// watches its stages' consumers so. Calls to d come one at a time; none
// comes once unwatch has returned. The client's log lines tell it (as
// for ReconnectFailures): on a Client not made by NewClient, or a nil
// one, it watches nothing and reports false, with an
// unwatch that does nothing. Give each watched consumer a name of its
// own: a later watch of the same name replaces the earlier.
func (c *Client) WatchReconnects(name string, d Degrader) (unwatch func(), ok bool) {
	if c == nil || c.last == nil {
		return func() {}, false
	}
	return c.last.watch(name, newReconnectWatch(d)), true
}

// WatchConsumer watches the reconnections of the consumer co is about to
// make, for a subscriber that makes its own consumers (a topic or
// topology backend): when client is a *Client and d is not nil, it names
// the consumer after its subscription with a suffix no other consumer
// of the process shares, and reports to d by
// WatchReconnects' rule until the returned unwatch is called. With
// another client, a nil co or a nil d, it changes nothing and watches
// nothing.
func WatchConsumer(client pulsar.Client, co *pulsar.ConsumerOptions, d Degrader) (unwatch func()) {
	c, ok := client.(*Client)
	if !ok || co == nil || d == nil || c == nil || c.last == nil {
		return func() {}
	}
	co.Name = co.SubscriptionName + "-" + processTag + "-" + strconv.FormatUint(consumerSeq.Add(1), 10)
	unwatch, _ = c.WatchReconnects(co.Name, d)
	return unwatch
}

// processTag and consumerSeq name the consumers WatchConsumer watches:
// the sequence number makes each name the process gives distinct (a watch
// is by name), the random tag tells the processes apart in the broker's
// statistics.
var (
	processTag  = randomTag()
	consumerSeq atomic.Uint64
)

func randomTag() string {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	return hex.EncodeToString(rnd[:])
}

// reconnectWatch follows the reconnections of one run's consumers, from
// the client's lines about them: the stage is degraded while one of them
// has failed ReconnectFailuresToDegrade attempts in a row, and runs again
// once each of those has reconnected or closed. A consumer that closes
// while it fails is not necessarily the run's: one of a subscribe an
// earlier run gave up on carries the same name; it must not hold the
// stage degraded for the rest of the run.
type reconnectWatch struct {
	health Degrader // the run's (producer.Stage.Health), or a subscriber's

	mu      sync.Mutex
	ended   bool           // the run let go of the watch: report nothing more
	failing map[string]int // failed attempts in a row, by partition consumer (topic and consumer id)
	down    int            // how many of them failed ReconnectFailuresToDegrade or more
}

func newReconnectWatch(health Degrader) *reconnectWatch {
	return &reconnectWatch{health: health, failing: map[string]int{}}
}

// failed notes a failed attempt of the partition consumer key to
// reconnect, with the client's error text.
func (w *reconnectWatch) failed(key, errText string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return
	}
	n := w.failing[key] + 1
	w.failing[key] = n
	if n == ReconnectFailuresToDegrade {
		w.down++
	}
	if n >= ReconnectFailuresToDegrade {
		w.health.Degrade(fmt.Errorf("%w: %s: %s", ErrReconnecting, failedReconnect, errText))
	}
}

// settled notes that the partition consumer key reconnected, or closed:
// either way it no longer tries to reconnect.
func (w *reconnectWatch) settled(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, ok := w.failing[key]
	if !ok || w.ended {
		return
	}
	delete(w.failing, key)
	if n >= ReconnectFailuresToDegrade {
		if w.down--; w.down == 0 {
			w.health.Recovered()
		}
	}
}

// end makes the watch report nothing more to its stage: the run it
// belongs to is ending. Its handle already ignores what comes once Run has
// returned; end also silences what comes while the run winds down.
func (w *reconnectWatch) end() {
	w.mu.Lock()
	w.ended = true
	w.mu.Unlock()
}

// ReconnectFailures returns how many times the client failed to
// reconnect a consumer of subscription sub to a broker since the first
// Source of sub was made with it (New): each attempt that pulsar-client-go logs as failed
// ("Failed to create consumer at reconnect"; it tries again after a
// backoff, from 100 ms doubling up to 1 minute, until it reconnects or the
// consumer closes). A consumer that reconnects at its first attempt (a
// broker handing its topics over) counts nothing. A client not made by
// NewClient counts nothing: the count comes from the client's log lines,
// which NewClient reads also when they go to a Logger of the caller's.
// The subscriptions no Source consumes (a topic backend's) count nothing,
// so that the client keeps a count per Source subscription only, however
// many subscriptions come and go. The count is by subscription name
// only: sources that share the client and a subscription name, on
// different topics, count each other's failures too.
func (c *Client) ReconnectFailures(sub string) int64 {
	if c == nil || c.last == nil {
		return 0
	}
	c.last.mu.Lock()
	defer c.last.mu.Unlock()
	return c.last.reconnects[sub]
}

func (l *lastFailure) set(msg string) {
	l.mu.Lock()
	l.at, l.msg = time.Now(), msg
	l.mu.Unlock()
}

// since returns the latest failure logged at or after t, or "".
func (l *lastFailure) since(t time.Time) string {
	if l == nil {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.at.Before(t) {
		return ""
	}
	return l.msg
}

// ServiceURL returns the service URL the client was created with, its user
// information (a password, a token) redacted; "" for a nil Client.
func (c *Client) ServiceURL() string {
	if c == nil {
		return ""
	}
	return c.url
}

// Unreached returns err, the error of a call to the client begun at
// began, wrapping sentinel and naming the broker (the service URL without
// its user information) and the latest connection failure the client
// logged since began (a refused connection, a handshake that timed out,
// credentials the broker refused; its credentials redacted), when it
// logged one; otherwise, and for a nil Client or a nil err, err as it is. The backends that declare topics
// through a client made by NewClient report with it a broker they could
// not reach.
func (c *Client) Unreached(sentinel, err error, began time.Time) error {
	if c == nil || err == nil {
		return err
	}
	return c.unreached(sentinel, err, c.last.since(began))
}

// Disconnected returns err as Unreached does, and also, when the client
// logged no connection failure since began, wrapping sentinel and naming
// the broker and the client's latest failure to connect to a broker when
// it has connected to none since: a producer or consumer of the client
// waiting to reconnect to a broker gone away tries again only after a
// backoff (up to a minute), so a call on it may fail while nothing new
// is logged. The backends report with it a send on a producer they made
// before the broker went away.
func (c *Client) Disconnected(sentinel, err error, began time.Time) error {
	if c == nil || err == nil {
		return err
	}
	cause := c.last.since(began)
	if cause == "" && c.last != nil {
		c.last.mu.Lock()
		cause = c.last.connecting
		c.last.mu.Unlock()
	}
	return c.unreached(sentinel, err, cause)
}

// unreached returns err wrapping sentinel and naming the broker and
// cause, or err when cause is "".
func (c *Client) unreached(sentinel, err error, cause string) error {
	if cause == "" {
		return err
	}
	broker := c.url
	if scheme, rest, ok := strings.Cut(broker, "//"); ok {
		if at := strings.LastIndexByte(rest, '@'); at >= 0 {
			broker = scheme + "//" + rest[at+1:]
		}
	}
	return fmt.Errorf("%w: %w: broker %s: %s", err, sentinel, broker, cause)
}

// String returns "pulsar client for <redacted service URL>" ("pulsar
// client (nil)" for a nil Client).
func (c *Client) String() string {
	if c == nil {
		return "pulsar client (nil)"
	}
	return "pulsar client for " + c.url
}

// GoString is String: the client's internals hold credentials.
func (c *Client) GoString() string { return c.String() }

// Format writes String for every verb (%q quotes it).
func (c *Client) Format(f fmt.State, verb rune) { redact.Format(f, verb, c.String()) }

// LogValue logs the redacted service URL only.
func (c *Client) LogValue() slog.Value { return slog.StringValue(c.String()) }

// Redact returns err with its message on one line, the user information of
// any URL in it redacted, and the credentials the client was created with
// (the password or token of its service URL, the token or basic password
// of its Authentication) replaced by "[redacted]", whatever put them there
// (a broker echoing what it refused); it unwraps to err. An err whose
// message needs none of this is returned as it is. A nil Client, which
// knows no credentials, redacts the user information of URLs only.
func (c *Client) Redact(err error) error {
	if c == nil {
		return redact.Secrets{}.Err(err)
	}
	return c.secrets.Err(err)
}

// RedactError returns err as c.Redact does when c is a *Client (one made by
// NewClient), so that the credentials it was created with never show in an
// error a broker echoed them into; for any other client, whose credentials
// it cannot know, it returns err with the user information of any URL in
// it redacted. It unwraps to err; a nil err stays nil. Packages that take
// a pulsar.Client from their user (the topic and topology backends) pass
// the client's errors through it.
func RedactError(c pulsar.Client, err error) error {
	if rc, ok := c.(*Client); ok && rc != nil {
		return rc.Redact(err)
	}
	return redact.Secrets{}.Err(err)
}

// NewClient creates a pulsar-client-go client with ClientDefaults(o, logger).
// Its error, like the client's logs, never shows the URL's user
// information. A URL whose user information does not parse (a raw "/",
// "?", "#" or space in a password) is an error wrapping ErrServiceURL,
// and is not handed to pulsar-client-go. TLS settings with a service URL the client would connect to
// in plaintext (pulsar://, http://), which it would ignore, are an error
// wrapping ErrTLSWithPlaintextURL. The caller closes the client once every
// pipeline using it has stopped.
func NewClient(o pulsar.ClientOptions, logger *slog.Logger) (*Client, error) {
	url := redact.ServiceURL(o.URL)
	if !redact.UserInfoParses(o.URL) {
		return nil, fmt.Errorf("pulsar: create client for %q: %w", url, ErrServiceURL)
	}
	if hasTLSSettings(&o) && !usesTLS(o.URL) {
		return nil, fmt.Errorf("pulsar: create client for %q: %w", url, ErrTLSWithPlaintextURL)
	}
	secrets := clientSecrets(&o)
	// The client's own lines tell its connection failures and its
	// consumers' reconnections (lastFailure). A Logger of the caller's
	// gets them as the client writes them, and a second logger that
	// writes nothing reads them too.
	last := new(lastFailure)
	var closes *brokerCloses
	if o.Logger == nil {
		o.Logger, closes = clientLogger(logger, last, secrets)
	} else {
		discard, _ := clientLogger(slog.New(slog.DiscardHandler), last, secrets)
		o.Logger = teeLogger{tee[plog.Logger]{o.Logger, discard}}
	}
	o = ClientDefaults(o, logger)
	c, err := pulsar.NewClient(o)
	if err != nil {
		return nil, fmt.Errorf("pulsar: create client for %q: %w", url, secrets.Err(err))
	}
	return &Client{Client: c, url: url, secrets: secrets, last: last, closes: closes}, nil
}

// clientSecrets returns the credentials of o that Client.Redact takes out
// of errors and the client's logger out of its lines: the password (or
// token) in the service URL's user information, as written and decoded,
// and the token or the basic user and password of the Authentication.
// Other providers (TLS, OAuth2, Athenz) are not asked: their data is a
// certificate or comes from a request of their own.
func clientSecrets(o *pulsar.ClientOptions) redact.Secrets {
	var vs []string
	if _, rest, ok := strings.Cut(o.URL, "//"); ok {
		if at := strings.LastIndexByte(rest, '@'); at >= 0 {
			info := rest[:at]
			if _, pw, ok := strings.Cut(info, ":"); ok {
				info = pw
			}
			vs = append(vs, info)
			if d, err := neturl.PathUnescape(info); err == nil {
				vs = append(vs, d)
			}
		}
	}
	if a, ok := o.Authentication.(interface {
		Name() string
		GetData() ([]byte, error)
	}); ok && (a.Name() == "token" || a.Name() == "basic") {
		if d, err := a.GetData(); err == nil {
			vs = append(vs, string(d))
			if user, pw, ok := strings.Cut(string(d), ":"); ok && a.Name() == "basic" {
				vs = append(vs, base64.StdEncoding.EncodeToString(d), pw, user)
			}
		}
	}
	return redact.NewSecrets(vs...)
}

// hasTLSSettings reports whether o sets anything pulsar-client-go uses
// only on a TLS connection.
func hasTLSSettings(o *pulsar.ClientOptions) bool {
	return o.TLSConfig != nil || o.TLSTrustCertsFilePath != "" || o.TLSCertificateFile != "" || o.TLSKeyFilePath != "" ||
		o.TLSValidateHostname || len(o.TLSCipherSuites) > 0 || o.TLSMinVersion != 0 || o.TLSMaxVersion != 0
}

// usesTLS reports whether pulsar-client-go connects to serviceURL with
// TLS: its scheme is https, or pulsar+ssl (any scheme whose parts after
// the first "+" include "ssl"), in any case.
func usesTLS(serviceURL string) bool {
	scheme, _, ok := strings.Cut(serviceURL, "://")
	if !ok {
		return false
	}
	parts := strings.Split(strings.ToLower(scheme), "+")
	return parts[0] == "https" || slices.Contains(parts[1:], "ssl")
}

// RedactURL returns s with the user information of every URL in it
// replaced: "pulsar://user:secret@host" becomes "pulsar://user:xxxxx@host",
// and "pulsar+ssl://token@host" becomes "pulsar+ssl://xxxxx@host".
func RedactURL(s string) string { return redact.URL(s) }

// RedactServiceURL returns serviceURL, one service URL, with its user
// information redacted as RedactURL redacts it, or, when that user
// information does not parse (a password with a raw "/", "?", "#" or
// space, which RedactURL cannot delimit), with everything between the
// "//" and the last "@" replaced: "pulsar://user:p/w@host" becomes
// "pulsar://xxxxx@host".
func RedactServiceURL(serviceURL string) string { return redact.ServiceURL(serviceURL) }

// ClientLogger adapts logger (nil: slog.Default()) to pulsar-client-go's
// logging interface. The user information of any URL in a message or field
// is redacted (the client logs its service URL on many lines) and line
// breaks are joined. The client's Info lines (connections opened,
// consumers created) are logged at Debug, but for the one that says the
// broker closed a consumer ("Broker notification of Closed consumer:
// <id>", its topic unloaded or deleted or its subscription deleted),
// kept at Info and logged with the consumer's topic, subscription and
// name besides the broker's address (when the consumer's own line that
// follows it has not come within a second, or more than 64 such lines
// wait for theirs, it is logged as it came, with the broker's address
// only). The warnings and errors it logs for events that lose
// nothing are logged at Debug too: messages it drops on receipt because
// they were delivered or acknowledged already ("receive 1 messages , all
// filtered", after a reconnection), and a consumer closed
// before the client sent it permits or a redelivery request ("Failed to
// redeliver closing or closed consumer"; the broker redelivers what a
// closed consumer held). Its other warnings and errors keep their level,
// one record per client log call, but for the failures it logs once per
// retry while a broker is out of reach: a connection that fails ("Failed
// to connect to broker.", "Failed to perform initial handshake") or whose
// handshake the broker refuses ("Failed to establish connection with
// broker: '<the broker's message>'", whatever that message), per broker
// address, and a consumer's or producer's reconnection that fails
// ("Failed to lookup topic", "Failed to create consumer at reconnect",
// "Failed to reconnect to broker, will retry later."), per consumer or
// producer (the lookup service's own failed lookups, per topic). Such a
// failure is logged when it begins, again after 1 minute
// and at intervals that double up to 1 hour with " (still)" after the
// message, the time it began ("since") and the count of failures so far
// ("failures"), and once at INFO with " (ended)" after the message and
// the count when the client next connects to that broker ("Connection is
// ready") or reconnects that consumer or producer; one that comes 5
// minutes or more after the last of its kind is logged as a new one. The
// returned logger keeps these runs for one client: give each client its
// own.
func ClientLogger(logger *slog.Logger) plog.Logger {
	l, _ := clientLogger(logger, nil, redact.Secrets{})
	return l
}

// clientLogger returns ClientLogger's logger, remembering last (nil:
// nothing) and taking secrets out of every line, and the lines it holds.
func clientLogger(logger *slog.Logger, last *lastFailure, secrets redact.Secrets) (plog.Logger, *brokerCloses) {
	h := cmp.Or(logger, slog.Default()).Handler()
	runs := &repeatlog.Runs[clientRun]{Log: slog.New(h), Bound: maxClientRuns, Idle: clientRunIdle}
	closes := &brokerCloses{h: h, held: map[string]heldClose{}}
	return plog.NewLoggerWithSlog(slog.New(&redactingHandler{h: h, last: last, runs: runs, closes: closes, secrets: secrets})), closes
}

// maxClientRuns is the most runs of repeated failures one client logger
// keeps (see repeatlog.Runs.Bound): two per consumer or producer
// partition reconnecting, one per broker address.
const maxClientRuns = 4096

// clientRunIdle is how long after the last failure of one of the
// client's runs the next one begins a new run: pulsar-client-go waits up
// to a minute and a fifth between a consumer's or producer's reconnection
// attempts, so an outage that goes on fails less often than
// repeatlog.Quiet, and would otherwise be logged as a new run at every
// attempt.
const clientRunIdle = 5 * time.Minute

// endedSuffix ends the message of the INFO line that ends a run of one of
// the client's repeated failures.
const endedSuffix = " (ended)"

// repeatedFailures are the messages of the warnings and errors
// pulsar-client-go logs once per retry while a broker is out of reach.
var repeatedFailures = []string{
	"Failed to connect to broker.",
	"Failed to perform initial handshake",
	"Failed to lookup topic",
	"Failed to create consumer at reconnect",
	"Failed to reconnect to broker, will retry later.",
}

// refusedHandshake begins the warning pulsar-client-go logs, with no error
// attached, when a broker answers its CONNECT with an error rather than
// CONNECTED; the broker's message follows in quotes ("Failed to
// authenticate" for credentials it refused). The connection is closed and
// the operation that needed it fails with "connection error" only.
// The client logs it at every retry, like repeatedFailures: the
// refusals of one broker address are one run, whatever the broker's
// message, each line keeping it.
const refusedHandshake = "Failed to establish connection with broker: "

// repeatedFailure returns the key of the runs of msg when it is one of
// the client's repeated failures: the message itself, or refusedHandshake
// for a broker's refusal of the handshake, whatever the broker's message.
func repeatedFailure(msg string) (key string, ok bool) {
	if slices.Contains(repeatedFailures, msg) {
		return msg, true
	}
	if strings.HasPrefix(msg, refusedHandshake) {
		return refusedHandshake, true
	}
	return "", false
}

// failureEnds are the messages of pulsar-client-go's Info lines that end
// the runs of failures of their broker address, consumer or producer.
var failureEnds = []string{
	connectedLine,
	"Reconnected consumer to broker",
	"Reconnected producer to broker",
}

// lostNothing reports whether a client warning or error, with its error
// text, is of an event that loses nothing, logged at Debug.
func lostNothing(msg, errText string) bool {
	switch msg {
	case "Failed to redeliver closing or closed consumer":
		// A consumer closed before the client sent it permits or a
		// redelivery request for nacked messages: the broker redelivers
		// whatever a closed consumer held. The client sends a consumer's
		// first permits from a goroutine of its own after Subscribe has
		// returned, and shows no sign of having sent them, so a consumer
		// closed soon after Subscribe (as the Pulsar topology backend's
		// Declare closes the consumers that make sure of its
		// subscriptions) cannot wait for them.
		return true
	case "unable to send initial permits to broker", "unable to send permits":
		// The same event, logged a second time with the flow's error.
		return errText == "consumer closing or closed"
	}
	// Messages dropped on receipt as delivered or acknowledged already:
	// acknowledged by batch index, before the position a reconnection
	// resumes from, or acknowledged and not yet flushed.
	rest, ok := strings.CutPrefix(msg, "receive ")
	return ok && strings.HasSuffix(rest, " messages , all filtered")
}

// clientRun is the key of a run of one of the client's repeated
// failures: its message and what it is about, a broker address or a
// consumer or producer (topic, subscription, id).
type clientRun struct {
	msg                                  string
	addr, topic, sub, consumer, producer string
}

// redactingHandler redacts URLs' user information, lowers Info, and the
// warnings and errors of events that lose nothing, to Debug, and limits
// the client's repeated failures (runs) before handing records on. With
// last set, it also remembers the latest warning or error that carries an
// error, enabled or not.
type redactingHandler struct {
	h       slog.Handler
	last    *lastFailure
	runs    *repeatlog.Runs[clientRun] // shared by every handler of one client
	closes  *brokerCloses              // shared by every handler of one client
	attrs   []slog.Attr                // given to WithAttrs, redacted: a run's lines carry them
	grouped bool                       // WithGroup was called: lines are not limited
	err     string                     // an "error" attribute given to WithAttrs
	of      clientRun                  // what the lines are about, msg unset
	name    string                     // the consumer's or producer's name, when the lines are about one
	secrets redact.Secrets             // the client's credentials, taken out of every line
}

// brokerClosedConsumer begins the client's Info line for a consumer the
// broker closed (CLOSE_CONSUMER: its topic unloaded or deleted, or its
// subscription deleted), followed by the consumer's id. It is kept at
// INFO: the client reconnects the consumer, and a subscription created
// anew starts at its initial position.
const brokerClosedConsumer = "Broker notification of Closed consumer: "

// consumerConnectionClosed is the client's Debug line, on the consumer's
// own logger (its topic, subscription, name and id), for a consumer whose
// connection closed or whom the broker closed. For the broker's close it
// comes right after the brokerClosedConsumer line, on the same goroutine.
const consumerConnectionClosed = "connection closed and send to connectClosedCh"

// unknownClosedConsumer is the client's warning, in place of
// consumerConnectionClosed, when the consumer the broker closed is not
// one of the connection's.
const unknownClosedConsumer = "Consumer with ID not found while closing consumer"

// brokerCloses holds the client's brokerClosedConsumer lines, by consumer
// id, from the moment the connection logs one (with the broker's address
// only) to the line the client logs next about that consumer: the
// consumer's own consumerConnectionClosed, with which the held line is
// logged with the consumer's fields (its topic, subscription and name), or
// unknownClosedConsumer, with which it is logged as it came. A line whose
// follow-up has not come within maxCloseWait (checked at the client's
// next line) or that is the oldest of more than maxHeldCloses is logged
// as it came, and so are those held when the client closes.
type brokerCloses struct {
	h    slog.Handler // the client's logger's, without fields
	mu   sync.Mutex
	held map[string]heldClose
	seq  uint64       // lines held so far, for their order
	n    atomic.Int32 // len(held), for Enabled
}

// maxCloseWait is how long a brokerClosedConsumer line waits for the
// consumer's own line, which the client logs right after it on the same
// goroutine.
const maxCloseWait = time.Second

// maxHeldCloses is the most brokerClosedConsumer lines held at once.
const maxHeldCloses = 64

// heldClose is a brokerClosedConsumer line held, with the connection's
// fields, since at, the seq-th line held.
type heldClose struct {
	rec   slog.Record
	attrs []slog.Attr
	at    time.Time
	seq   uint64
}

// hold holds the line rec, with attrs, about the consumer with id; a line
// about that consumer held already, and the oldest line held when more
// than maxHeldCloses are, are logged as they came.
func (b *brokerCloses) hold(ctx context.Context, id string, rec slog.Record, attrs []slog.Attr) error {
	b.mu.Lock()
	var out []heldClose
	if prev, ok := b.held[id]; ok {
		out = append(out, prev)
	}
	b.seq++
	b.held[id] = heldClose{rec: rec, attrs: attrs, at: time.Now(), seq: b.seq}
	if len(b.held) > maxHeldCloses {
		oldest := id
		for k, c := range b.held {
			if c.seq < b.held[oldest].seq {
				oldest = k
			}
		}
		out = append(out, b.held[oldest])
		delete(b.held, oldest)
	}
	b.n.Store(int32(len(b.held)))
	b.mu.Unlock()
	return b.log(ctx, out)
}

// expire logs, as they came, the lines held for maxCloseWait or more.
func (b *brokerCloses) expire(ctx context.Context) error {
	if b.n.Load() == 0 {
		return nil
	}
	now := time.Now()
	return b.drop(ctx, func(c heldClose) bool { return now.Sub(c.at) >= maxCloseWait })
}

// flush logs, as they came, every line held.
func (b *brokerCloses) flush(ctx context.Context) {
	_ = b.drop(ctx, func(heldClose) bool { return true })
}

// drop logs, as they came and in the order they were held, the lines
// held for which expired reports true, and lets go of them.
func (b *brokerCloses) drop(ctx context.Context, expired func(heldClose) bool) error {
	b.mu.Lock()
	var out []heldClose
	for id, c := range b.held {
		if expired(c) {
			out = append(out, c)
			delete(b.held, id)
		}
	}
	b.n.Store(int32(len(b.held)))
	b.mu.Unlock()
	slices.SortFunc(out, func(x, y heldClose) int { return cmp.Compare(x.seq, y.seq) })
	return b.log(ctx, out)
}

// log logs cs as they came.
func (b *brokerCloses) log(ctx context.Context, cs []heldClose) error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.log(ctx, b.h))
	}
	return errors.Join(errs...)
}

// take returns the line held about the consumer with id, and lets go of
// it.
func (b *brokerCloses) take(id string) (heldClose, bool) {
	if b.n.Load() == 0 {
		return heldClose{}, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	c, ok := b.held[id]
	delete(b.held, id)
	b.n.Store(int32(len(b.held)))
	return c, ok
}

// log logs the held line to h, with its fields.
func (c heldClose) log(ctx context.Context, h slog.Handler) error {
	out := c.rec.Clone()
	out.AddAttrs(c.attrs...)
	return h.Handle(ctx, out)
}

func clientLevel(l slog.Level) slog.Level {
	if l == slog.LevelInfo {
		return slog.LevelDebug
	}
	return l
}

func (r *redactingHandler) Enabled(ctx context.Context, l slog.Level) bool {
	switch {
	case r.last != nil && l >= slog.LevelWarn:
		return true
	case l == slog.LevelInfo && r.runs.Going():
		return true // the line may end a run
	case l == slog.LevelInfo && r.last != nil && r.of.consumer != "":
		return true // the line may say that a consumer reconnected or closes
	case l == slog.LevelInfo && r.last != nil && r.of.addr != "" && r.last.disconnected.Load():
		return true // the line may say that the client connected to a broker
	case l == slog.LevelInfo && r.of.addr != "" && r.h.Enabled(ctx, l):
		return true // the line may say that the broker closed a consumer
	case r.of.consumer != "" && r.closes.n.Load() > 0:
		return true // the line may follow the broker's closing that consumer
	}
	return r.h.Enabled(ctx, clientLevel(l))
}

func (r *redactingHandler) Handle(ctx context.Context, rec slog.Record) error {
	// A failure to log a line held is no reason not to log rec.
	_ = r.closes.expire(ctx)
	msg := r.secrets.Text(rec.Message)
	errText := r.err
	var attrs []slog.Attr
	rec.Attrs(func(a slog.Attr) bool {
		a = r.secrets.Attr(a)
		if a.Key == "error" {
			errText = a.Value.String()
		}
		attrs = append(attrs, a)
		return true
	})
	level := clientLevel(rec.Level)
	if rec.Level == slog.LevelInfo && strings.HasPrefix(msg, brokerClosedConsumer) {
		level = slog.LevelInfo
	}
	if level >= slog.LevelWarn && lostNothing(msg, errText) {
		level = slog.LevelDebug
	}
	if r.last != nil && level >= slog.LevelWarn {
		failure := msg
		if errText != "" {
			failure += ": " + errText
		}
		if errText != "" || strings.HasPrefix(msg, refusedHandshake) {
			r.last.set(failure)
		}
		if connectFailure(msg) {
			r.last.setConnecting(failure)
		}
	}
	if r.last != nil && rec.Level == slog.LevelInfo && msg == connectedLine {
		r.last.setConnecting("")
	}
	if r.last != nil && msg == failedReconnect {
		r.last.reconnectFailed(r.of.sub)
		if w := r.last.watchOf(r.name); w != nil {
			w.failed(r.of.topic+"#"+r.of.consumer, errText)
		}
	}
	if r.last != nil && (msg == reconnectedConsumer || strings.HasPrefix(msg, closingConsumer)) {
		if w := r.last.watchOf(r.name); w != nil {
			w.settled(r.of.topic + "#" + r.of.consumer)
		}
	}
	if rec.Level == slog.LevelInfo && slices.Contains(failureEnds, msg) {
		r.endRuns(ctx)
	}
	if err := r.closed(ctx, msg); err != nil {
		return err
	}
	if key, ok := repeatedFailure(msg); ok && level >= slog.LevelWarn && r.limits() {
		k := r.of
		k.msg = key
		r.runs.Fail(ctx, k, repeatlog.Event{Level: level, Msg: msg, Ended: msg + endedSuffix,
			Attrs: append(r.attrs[:len(r.attrs):len(r.attrs)], attrs...)})
		return nil
	}
	if !r.h.Enabled(ctx, level) {
		return nil
	}
	out := slog.NewRecord(rec.Time, level, msg, rec.PC)
	if level == slog.LevelInfo && !r.grouped && strings.HasPrefix(msg, brokerClosedConsumer) {
		return r.closes.hold(ctx, strings.TrimPrefix(msg, brokerClosedConsumer), out,
			append(r.attrs[:len(r.attrs):len(r.attrs)], attrs...))
	}
	out.AddAttrs(attrs...)
	return r.h.Handle(ctx, out)
}

// closed logs the brokerClosedConsumer line held about the handler's
// consumer when msg is the line the client logs next about it: with the
// consumer's fields when the consumer logs it, as it came when the
// connection found no such consumer.
func (r *redactingHandler) closed(ctx context.Context, msg string) error {
	if r.of.consumer == "" || (msg != consumerConnectionClosed && msg != unknownClosedConsumer) {
		return nil
	}
	c, ok := r.closes.take(r.of.consumer)
	switch {
	case !ok:
		return nil
	case msg == consumerConnectionClosed:
		return c.log(ctx, r.h)
	default:
		return c.log(ctx, r.closes.h)
	}
}

// limits reports whether the handler's lines are about a broker address,
// a consumer, a producer or a topic (the lookup service's), so that its
// repeated failures are limited.
func (r *redactingHandler) limits() bool {
	return !r.grouped && (r.of.addr != "" || r.of.consumer != "" || r.of.producer != "" || r.of.topic != "")
}

// endRuns ends the runs of the handler's broker address, consumer or
// producer, each with its INFO line, and those of the lookups of its
// topic: a consumer or producer that reconnects found its topic.
func (r *redactingHandler) endRuns(ctx context.Context) {
	if !r.runs.Going() || !r.limits() {
		return
	}
	k := r.of
	lookup := clientRun{topic: k.topic}
	for _, m := range repeatedFailures {
		k.msg = m
		r.runs.End(ctx, k)
		if lookup.topic != "" && lookup != r.of {
			lookup.msg = m
			r.runs.End(ctx, lookup)
		}
	}
	k.msg = refusedHandshake
	r.runs.End(ctx, k)
}

func (r *redactingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *r
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = r.secrets.Attr(a)
		switch red[i].Key {
		case "error":
			c.err = red[i].Value.String()
		case "remote_addr":
			c.of.addr = red[i].Value.String()
		case "topic":
			c.of.topic = red[i].Value.String()
		case "subscription":
			c.of.sub = red[i].Value.String()
		case "consumerID":
			c.of.consumer = red[i].Value.String()
		case "name":
			c.name = red[i].Value.String()
		case "producerID":
			c.of.producer = red[i].Value.String()
		}
	}
	c.attrs = append(r.attrs[:len(r.attrs):len(r.attrs)], red...)
	c.h = r.h.WithAttrs(red)
	return &c
}

func (r *redactingHandler) WithGroup(name string) slog.Handler {
	c := *r
	c.grouped = true
	c.h = r.h.WithGroup(name)
	return &c
}
