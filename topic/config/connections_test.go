package config_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/config"
	"github.com/boulevard-go/boulevard/validate"
)

const connectedDoc = `
defaults:
  backend: kafka
  connection: main
connections:
  main:
    kind: kafka
    brokers: [127.0.0.1:9092, "kafka-2:9093"]
    tls:
      ca_file: /etc/ssl/ca.pem
    sasl:
      mechanism: SCRAM-SHA-512
      username: svc
      password_env: BOULEVARD_TEST_KAFKA_PASSWORD
  events:
    kind: pulsar
    service_url: pulsar+ssl://pulsar:6651
    token_env: BOULEVARD_TEST_PULSAR_TOKEN
topics:
  orders: {}
  audit:
    backend: pulsar
    connection: events
  scratch:
    backend: in_memory
    connection: ""
`

// Connections are parsed with their defaults, and topics reach them by
// name, directly or through defaults.
func TestParseConnections(t *testing.T) {
	cfg := mustParse(t, connectedDoc)
	main := cfg.Connections["main"]
	if main.Kind != "kafka" || len(main.Brokers) != 2 || main.Brokers[1] != "kafka-2:9093" {
		t.Fatalf("main = %+v", main)
	}
	if main.TLS == nil || !main.TLS.Enabled || main.TLS.CAFile != "/etc/ssl/ca.pem" {
		t.Fatalf("main.TLS = %+v, want enabled with the CA file", main.TLS)
	}
	if main.SASL == nil || main.SASL.Mechanism != "SCRAM-SHA-512" || main.SASL.Password.Env != "BOULEVARD_TEST_KAFKA_PASSWORD" {
		t.Fatalf("main.SASL = %+v", main.SASL)
	}
	if ev := cfg.Connections["events"]; ev.Kind != "pulsar" || ev.ServiceURL != "pulsar+ssl://pulsar:6651" || ev.Token.Env != "BOULEVARD_TEST_PULSAR_TOKEN" {
		t.Fatalf("events = %+v", ev)
	}
	for name, want := range map[string][2]string{"orders": {"kafka", "main"}, "audit": {"pulsar", "events"}, "scratch": {"in_memory", ""}} {
		if s := cfg.Topics[name]; s.Backend != want[0] || s.Connection != want[1] {
			t.Errorf("topic %s: backend %q connection %q, want %q %q", name, s.Backend, s.Connection, want[0], want[1])
		}
	}
	plan, err := config.Resolve(cfg, config.Wiring{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range plan.Topics {
		if (tp.Conn != nil) != (tp.Connection != "") || (tp.Conn != nil && tp.Conn.Name != tp.Connection) {
			t.Errorf("plan of %s: Connection %q, Conn %+v", tp.Name, tp.Connection, tp.Conn)
		}
	}
}

// Every connection mistake is reported with its YAML path, all together.
func TestParseRejectsBadConnections(t *testing.T) {
	cases := []struct{ name, doc, want string }{
		{"kafka without brokers", `
connections:
  k: {kind: kafka}`, "connections.k.brokers is required for a kafka connection"},
		{"broker not host:port", `
connections:
  k: {kind: kafka, brokers: ["localhost"]}`, `connections.k.brokers.0 must be host:port, not "localhost"`},
		{"unknown kind", `
connections:
  k: {kind: rabbitmq}`, "connections.k.kind"},
		{"pulsar scheme", `
connections:
  p: {kind: pulsar, service_url: "http://x:1"}`, `connections.p.service_url must be pulsar://host:port or pulsar+ssl://host:port, not "http://x:1"`},
		{"sasl on pulsar", `
connections:
  p: {kind: pulsar, service_url: "pulsar://x:1", sasl: {mechanism: PLAIN, username: u, password_env: P}}`, "connections.p.sasl is for kafka connections"},
		{"token on kafka", `
connections:
  k: {kind: kafka, brokers: ["x:1"], token_env: T}`, "connections.k.token_env is for pulsar connections"},
		{"a secret written in the document", `
connections:
  k: {kind: kafka, brokers: ["x:1"], sasl: {mechanism: PLAIN, username: u, password: hunter2}}`, "connections.k.sasl.password is not a known key"},
		{"sasl without password_env", `
connections:
  k: {kind: kafka, brokers: ["x:1"], sasl: {mechanism: PLAIN, username: u}}`, "connections.k.sasl.password_env is required"},
		{"bad environment variable name", `
connections:
  p: {kind: pulsar, service_url: "pulsar://x:1", token_env: "1 bad"}`, `connections.p.token_env must be an environment variable name`},
		{"certificate without key", `
connections:
  k: {kind: kafka, brokers: ["x:1"], tls: {cert_file: c.pem}}`, "connections.k.tls.key_file is required when cert_file is set"},
		{"enabled not a boolean", `
connections:
  k: {kind: kafka, brokers: ["x:1"], tls: {enabled: maybe}}`, `connections.k.tls.enabled must be true or false, not "maybe"`},
		{"port zero", `
connections:
  k: {kind: kafka, brokers: ["x:0"]}`, `connections.k.brokers.0 must be host:port, not "x:0"`},
		{"port past 65535", `
connections:
  k: {kind: kafka, brokers: ["x:65536"]}`, `connections.k.brokers.0 must be host:port, not "x:65536"`},
		{"service_url on kafka", `
connections:
  k: {kind: kafka, brokers: ["x:1"], service_url: "pulsar://x:1"}`, "connections.k.service_url is for pulsar connections, not kafka"},
		{"brokers on pulsar", `
connections:
  p: {kind: pulsar, service_url: "pulsar://x:1", brokers: ["x:1"]}`, "connections.p.brokers is for kafka connections, not pulsar"},
		{"pulsar URL without a host", `
connections:
  p: {kind: pulsar, service_url: "pulsar:///x"}`, `connections.p.service_url must be pulsar://host:port or pulsar+ssl://host:port, not "pulsar:///x"`},
		{"environment variable name too long", `
connections:
  p: {kind: pulsar, service_url: "pulsar://x:1", token_env: ` + strings.Repeat("A", 129) + `}`, "connections.p.token_env must be an environment variable name"},
		{"bad connection name", `
connections:
  "a b": {kind: kafka, brokers: ["x:1"]}`, `connections."a b" name `},
		{"brokers not a list", `
connections:
  k: {kind: kafka, brokers: "x:1"}`, "connections.k.brokers must be a list"},
		{"kafka topic without connection", `
topics:
  t: {backend: kafka}`, "topics.t.connection is required for backend kafka"},
		{"unknown connection", `
connections:
  k: {kind: kafka, brokers: ["x:1"]}
topics:
  t: {backend: kafka, connection: nope}`, `topics.t.connection names no declared connection: "nope"`},
		{"kind mismatch", `
connections:
  k: {kind: kafka, brokers: ["x:1"]}
groups:
  g:
    topics:
      t: {backend: pulsar, connection: k}`, "groups.g.topics.t.connection names k, a kafka connection, but the topic's backend is pulsar"},
		{"connection on in_memory", `
connections:
  k: {kind: kafka, brokers: ["x:1"]}
topics:
  t: {connection: k}`, "topics.t.connection must not be set for backend in_memory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := config.Parse(yamlDoc(c.doc))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Parse error = %v, want one containing %q", err, c.want)
			}
		})
	}
}

// A secret's value is read from its environment variable when asked for,
// and appears in no error, formatted value or log line.
func TestSecretsStayOutOfErrorsAndLogs(t *testing.T) {
	const password, token = "s3cr3t-kafka-pw", "s3cr3t-pulsar-token"
	t.Setenv("BOULEVARD_TEST_KAFKA_PASSWORD", password)
	t.Setenv("BOULEVARD_TEST_PULSAR_TOKEN", token)
	cfg := mustParse(t, connectedDoc)
	main, events := cfg.Connections["main"], cfg.Connections["events"]
	if v, err := main.SASL.Password.Value(); err != nil || v != password {
		t.Fatalf("Password.Value() = %q, %v", v, err)
	}
	if v, err := events.Token.Value(); err != nil || v != token {
		t.Fatalf("Token.Value() = %q, %v", v, err)
	}
	var out strings.Builder
	for _, c := range []config.ConnectionSpec{main, events} {
		fmt.Fprintf(&out, "%v %+v %#v %s\n", c, c, c, c.Token)
		if c.SASL != nil {
			fmt.Fprintf(&out, "%v %+v %#v\n", *c.SASL, *c.SASL, *c.SASL)
		}
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	log.Info("connection", "main", main, "events", events, "password", main.SASL.Password, "token", events.Token)
	out.WriteString(logs.String())
	t.Setenv("BOULEVARD_TEST_PULSAR_TOKEN", "")
	_, err := events.Token.Value()
	if !errors.Is(err, config.ErrSecretUnset) || !strings.Contains(err.Error(), "BOULEVARD_TEST_PULSAR_TOKEN") {
		t.Fatalf("unset token: %v, want ErrSecretUnset naming the variable", err)
	}
	for _, secret := range []string{password, token} {
		if strings.Contains(out.String(), secret) {
			t.Fatalf("a secret leaked into formatted output or logs:\n%s", out.String())
		}
	}
	if !strings.Contains(logs.String(), "$BOULEVARD_TEST_KAFKA_PASSWORD") {
		t.Fatalf("the log names no variable: %s", logs.String())
	}
}

// fakeBackend is the in-memory backend under another name, counting Close.
type fakeBackend struct {
	topic.InMemory[int]
	name   string
	closed *atomic.Int32 // Wired.Close closes backends at once
}

func (f fakeBackend) Name() string { return f.name }

func (f fakeBackend) Close(context.Context) error { f.closed.Add(1); return nil }

// BuildContext asks the connector once per connection, creates the topics
// on the backends it returns, and Wired.Close closes those backends.
func TestBuildContextConnectsOncePerConnection(t *testing.T) {
	cfg := mustParse(t, connectedDoc+`
  payments: {}
`)
	plan, err := config.Resolve(cfg, config.Wiring{})
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int{}
	var closed atomic.Int32
	connect := func(_ context.Context, c config.ConnectionSpec) (topic.Backend[int], error) {
		calls[c.Name]++
		return fakeBackend{name: c.Kind, closed: &closed}, nil
	}
	broker := topic.NewBroker[int]()
	defer broker.Close()
	w, err := config.BuildContext(t.Context(), broker, plan, config.BuildOptions[int]{Connect: connect})
	if err != nil {
		t.Fatal(err)
	}
	if calls["main"] != 1 || calls["events"] != 1 || len(calls) != 2 {
		t.Fatalf("connector calls = %v, want one per connection", calls)
	}
	for name, backend := range map[topic.Name]string{"orders": "kafka", "payments": "kafka", "audit": "pulsar", "scratch": "in_memory"} {
		if h := w.Topics[name]; h == nil || h.Backend() != backend {
			t.Fatalf("topic %s on %v, want %s", name, h, backend)
		}
	}
	if err := w.Close(t.Context()); err != nil || closed.Load() != 2 {
		t.Fatalf("Close = %v, closed %d backends, want 2", err, closed.Load())
	}
}

// Without a connector, or with one that fails, makes the wrong kind of
// backend or makes none, nothing is created, the error names the topic's connection
// path, and the backends already made are closed.
func TestBuildContextConnectorFailures(t *testing.T) {
	plan, err := config.Resolve(mustParse(t, connectedDoc), config.Wiring{})
	if err != nil {
		t.Fatal(err)
	}
	refused := errors.New("connection refused")
	var closed atomic.Int32
	cases := []struct {
		name    string
		connect config.Connector[int]
		want    error
		text    string
	}{
		{"none", nil, config.ErrNoConnector, "topics.orders.connection"},
		{"fails", func(_ context.Context, c config.ConnectionSpec) (topic.Backend[int], error) {
			if c.Kind == "pulsar" {
				return nil, refused
			}
			return fakeBackend{name: c.Kind, closed: &closed}, nil
		}, refused, "topics.audit.connection: connection refused"},
		{"wrong kind", func(_ context.Context, c config.ConnectionSpec) (topic.Backend[int], error) {
			return fakeBackend{name: "in_memory", closed: &closed}, nil
		}, config.ErrWrongBackend, `wrong kind: "in_memory" for a kafka connection`},
		{"no backend", func(context.Context, config.ConnectionSpec) (topic.Backend[int], error) {
			return nil, nil
		}, config.ErrWrongBackend, "wrong kind: nil for a kafka connection"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			closed.Store(0)
			broker := topic.NewBroker[int]()
			defer broker.Close()
			_, err := config.BuildContext(t.Context(), broker, plan, config.BuildOptions[int]{Connect: c.connect})
			if err == nil || (c.want != nil && !errors.Is(err, c.want)) || !strings.Contains(err.Error(), c.text) {
				t.Fatalf("BuildContext = %v, want %v containing %q", err, c.want, c.text)
			}
			if n := broker.Names(); len(n) != 0 {
				t.Fatalf("topics created despite the error: %v", n)
			}
			if c.name == "fails" && closed.Load() != 1 {
				t.Fatalf("closed %d backends after the failure, want the kafka one", closed.Load())
			}
		})
	}
}

// Guarantee: a backend the connector made for a connection of another
// kind is closed: BuildContext refuses it, and the caller never gets it to
// close.
func TestBuildContextClosesABackendOfTheWrongKind(t *testing.T) {
	plan, err := config.Resolve(mustParse(t, connectedDoc), config.Wiring{})
	if err != nil {
		t.Fatal(err)
	}
	var made, closed atomic.Int32
	connect := func(_ context.Context, c config.ConnectionSpec) (topic.Backend[int], error) {
		made.Add(1)
		return fakeBackend{name: "in_memory", closed: &closed}, nil
	}
	broker := topic.NewBroker[int]()
	defer broker.Close()
	if _, err := config.BuildContext(t.Context(), broker, plan, config.BuildOptions[int]{Connect: connect}); !errors.Is(err, config.ErrWrongBackend) {
		t.Fatalf("BuildContext = %v, want the wrong kind refused with an error wrapping ErrWrongBackend", err)
	}
	if made.Load() == 0 || closed.Load() != made.Load() {
		t.Fatalf("closed %d of the %d backends of the wrong kind the connector made, want every one", closed.Load(), made.Load())
	}
}

// Guarantee: a credential written in the document, as the user information
// of a service URL or a broker address or as the value of a *_env key, is
// refused, and no parse error repeats it.
func TestParseRefusesCredentialsInTheDocumentWithoutRepeatingThem(t *testing.T) {
	const secret = "s3cr3t-9e41"
	cases := []struct{ name, conn, want string }{
		{"password in a pulsar URL", `{kind: pulsar, service_url: "pulsar://svc:` + secret + `@pulsar:6650"}`,
			"connections.c.service_url must not hold user information"},
		{"token in a pulsar+ssl URL", `{kind: pulsar, service_url: "pulsar+ssl://` + secret + `@pulsar:6651"}`,
			"connections.c.service_url must not hold user information"},
		{"password in a URL of another scheme", `{kind: pulsar, service_url: "http://svc:` + secret + `@pulsar:8080"}`,
			`connections.c.service_url must be pulsar://host:port or pulsar+ssl://host:port, not "http://xxxxx@pulsar:8080"`},
		{"password with a space in a URL", `{kind: pulsar, service_url: "pulsar://svc:a ` + secret + `@pulsar:6650"}`,
			"connections.c.service_url"},
		{"password in a broker URL", `{kind: kafka, brokers: ["sasl_ssl://svc:` + secret + `@kafka:9093"]}`,
			`connections.c.brokers.0 must be host:port, not "sasl_ssl://xxxxx@kafka:9093"`},
		{"password in a broker address", `{kind: kafka, brokers: ["svc:` + secret + `@kafka:9093"]}`,
			`connections.c.brokers.0 must be host:port, not "xxxxx@kafka:9093"`},
		{"token as token_env", `{kind: pulsar, service_url: "pulsar://pulsar:6650", token_env: "eyJhbGciOi.` + secret + `.sig"}`,
			"connections.c.token_env must be an environment variable name"},
		{"password as password_env", `{kind: kafka, brokers: ["kafka:9092"], sasl: {mechanism: PLAIN, username: svc, password_env: "` + secret + `!"}}`,
			"connections.c.sasl.password_env must be an environment variable name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := config.Parse(yamlDoc("connections:\n  c: " + c.conn + "\n"))
			if err == nil {
				t.Fatal("Parse accepted the document")
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("the error repeats the credential: %v", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Parse error = %v, want one containing %q", err, c.want)
			}
		})
	}
}

// Guarantee: a pulsar connection with TLS enabled and a pulsar:// service
// URL, on which pulsar-client-go would connect in plaintext whatever the
// TLS settings, is refused; with pulsar+ssl://, or with TLS disabled, it is
// accepted.
func TestParseRefusesTLSOnAPlaintextPulsarURL(t *testing.T) {
	for _, c := range []struct {
		conn string
		ok   bool
	}{
		{`{kind: pulsar, service_url: "pulsar://pulsar:6651", tls: {ca_file: ca.pem}}`, false},
		{`{kind: pulsar, service_url: "PULSAR://pulsar:6651", tls: {}}`, false},
		{`{kind: pulsar, service_url: "pulsar+ssl://pulsar:6651", tls: {ca_file: ca.pem}}`, true},
		{`{kind: pulsar, service_url: "pulsar://pulsar:6650", tls: {enabled: false}}`, true},
		{`{kind: pulsar, service_url: "pulsar://pulsar:6650"}`, true},
	} {
		_, err := config.Parse(yamlDoc("connections:\n  c: " + c.conn + "\n"))
		if c.ok && err != nil {
			t.Errorf("%s: %v", c.conn, err)
		}
		if !c.ok && (err == nil || !strings.Contains(err.Error(), "connections.c.tls needs a pulsar+ssl:// service_url")) {
			t.Errorf("%s: Parse error = %v, want one naming connections.c.tls", c.conn, err)
		}
	}
}

// Every key of connections.<name>.tls reaches the ConnectionSpec, and tls
// present turns TLS on unless enabled says false.
func TestParseKeepsEveryTLSSetting(t *testing.T) {
	cfg := mustParse(t, `
connections:
  full:
    kind: kafka
    brokers: ["x:1"]
    tls:
      ca_file: ca.pem
      cert_file: client.pem
      key_file: client.key
      server_name: kafka.internal
      insecure_skip_verify: true
  off:
    kind: kafka
    brokers: ["x:1"]
    tls: {enabled: false}
`)
	want := config.TLSSpec{Enabled: true, CAFile: "ca.pem", CertFile: "client.pem", KeyFile: "client.key",
		ServerName: "kafka.internal", InsecureSkipVerify: true}
	if got := cfg.Connections["full"].TLS; got == nil || *got != want {
		t.Errorf("full.TLS = %+v, want %+v", got, want)
	}
	if got := cfg.Connections["off"].TLS; got == nil || *got != (config.TLSSpec{}) {
		t.Errorf("off.TLS = %+v, want present and disabled", got)
	}
}

// A document declares at most MaxConnections connections.
func TestParseBoundsConnections(t *testing.T) {
	doc := func(n int) []byte {
		var b strings.Builder
		b.WriteString("connections:\n")
		for i := range n {
			fmt.Fprintf(&b, "  c%d: {kind: kafka, brokers: [\"x:1\"]}\n", i)
		}
		return []byte(b.String())
	}
	if _, err := config.Parse(doc(config.MaxConnections)); err != nil {
		t.Fatalf("%d connections: %v", config.MaxConnections, err)
	}
	_, err := config.Parse(doc(config.MaxConnections + 1))
	if want := "connections declares 65 connections, more than the limit of 64"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("%d connections: got %v, want an error containing %q", config.MaxConnections+1, err, want)
	}
}

// Guarantee: a kafka connection lists at most 64 brokers: 64 are accepted,
// 65 are refused with an error naming the key and the rule.
func TestParseBoundsAConnectionsBrokers(t *testing.T) {
	doc := func(n int) []byte {
		brokers := make([]string, n)
		for i := range brokers {
			brokers[i] = fmt.Sprintf("\"b%d:9092\"", i)
		}
		return []byte("connections:\n  k: {kind: kafka, brokers: [" + strings.Join(brokers, ", ") + "]}\n")
	}
	if _, err := config.Parse(doc(64)); err != nil {
		t.Fatalf("64 brokers: %v", err)
	}
	_, err := config.Parse(doc(65))
	var es validate.Errors
	if !errors.As(err, &es) || len(es) != 1 || !es.Has("connections.k.brokers", "max") {
		t.Fatalf("65 brokers: got %v, want one max error on connections.k.brokers", err)
	}
}

// refusingBackend is a fakeBackend whose Close fails with err.
type refusingBackend struct {
	fakeBackend
	err error
}

func (r refusingBackend) Close(ctx context.Context) error {
	_ = r.fakeBackend.Close(ctx)
	return r.err
}

// Wired.Close returns the errors of every backend's Close joined: each
// matches with errors.Is.
func TestWiredCloseMatchesTheErrorOfEveryBackend(t *testing.T) {
	plan, err := config.Resolve(mustParse(t, connectedDoc), config.Wiring{})
	if err != nil {
		t.Fatal(err)
	}
	refusals := map[string]error{"kafka": errors.New("kafka refused"), "pulsar": errors.New("pulsar refused")}
	var closed atomic.Int32
	connect := func(_ context.Context, c config.ConnectionSpec) (topic.Backend[int], error) {
		return refusingBackend{fakeBackend{name: c.Kind, closed: &closed}, refusals[c.Kind]}, nil
	}
	broker := topic.NewBroker[int]()
	defer broker.Close()
	w, err := config.BuildContext(t.Context(), broker, plan, config.BuildOptions[int]{Connect: connect})
	if err != nil {
		t.Fatal(err)
	}
	err = w.Close(t.Context())
	for kind, want := range refusals {
		if !errors.Is(err, want) {
			t.Errorf("Close = %v, want it to match the %s backend's %v", err, kind, want)
		}
	}
}
