package connector_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/message"
	spulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/config"
	"github.com/boulevard-go/boulevard/topic/connector"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
	"github.com/boulevard-go/boulevard/topic/pulsartopic"
	"github.com/boulevard-go/boulevard/validate"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// sarama's metric registry starts one process-wide ticker and never stops it.
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
		// pulsar-client-go (v0.21.0) producer_partition.go: failTimeoutMessages
		// checks for a closed producer only when its SendTimeout timer
		// (30s by default) fires: it outlives a closed producer that long.
		goleak.IgnoreTopFunction("github.com/apache/pulsar-client-go/pulsar.(*partitionProducer).failTimeoutMessages"),
	)
}

const password = "pw-5ecret-for-svc" // what must never appear in errors or logs

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func saslCluster(t *testing.T) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-512", "svc", password))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func doc(addr, env string) []byte {
	return []byte(`
connections:
  main:
    kind: kafka
    brokers: [` + addr + `]
    sasl: {mechanism: SCRAM-SHA-512, username: svc, password_env: ` + env + `}
topics:
  orders: {backend: kafka, connection: main}
`)
}

func newConnector(t *testing.T, log *slog.Logger) config.Connector[string] {
	t.Helper()
	conn, err := connector.New(connector.Options[string]{
		Codec:  topic.StringCodec{},
		Logger: log,
		Kafka: func(_ config.ConnectionSpec, o *kafkatopic.Options[string]) {
			o.ConnectTimeout = 2 * time.Second
			o.AdminTimeout = 10 * time.Second
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// A document's Kafka connection authenticates with SCRAM-SHA-512, its
// password read from the environment, and its topic carries messages.
func TestKafkaConnectionAuthenticatesFromEnvironment(t *testing.T) {
	c := saslCluster(t)
	t.Setenv("BOULEVARD_TEST_PW", password)
	var logs syncBuffer
	broker := topic.NewBroker[string]()
	defer broker.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := config.LoadContext(ctx, doc(c.ListenAddrs()[0], "BOULEVARD_TEST_PW"),
		config.Wiring{Pipelines: []config.Pipeline{{Name: "p", Subscribes: []config.Subscribe{{Topic: "orders", Mode: config.Balanced, ConsumerGroup: "billing"}}}}},
		broker, config.BuildOptions[string]{Connect: newConnector(t, slog.New(slog.NewTextHandler(&logs, nil)))})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := w.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	h := w.Topics["orders"]
	if h.Backend() != "kafka" {
		t.Fatalf("orders on %s", h.Backend())
	}
	sub, err := h.Subscribe(t.Context(), topic.Balanced("billing"), topic.SubscriberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := h.Publish(ctx, "order-1"); err != nil {
		t.Fatal(err)
	}
	it, err := sub.Receive(ctx)
	if err != nil || it.Value != "order-1" {
		t.Fatalf("Receive = %+v, %v", it, err)
	}
	if err := sub.Ack(it.ID); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	if strings.Contains(logs.String(), password) {
		t.Fatalf("the password reached the log:\n%s", logs.String())
	}
}

// A wrong password fails within the connect bound, naming the topic's
// connection, and neither the error nor the log holds the password.
func TestKafkaConnectionRejectedKeepsSecret(t *testing.T) {
	c := saslCluster(t)
	t.Setenv("BOULEVARD_TEST_PW", password+"-wrong")
	var logs syncBuffer
	broker := topic.NewBroker[string]()
	defer broker.Close()
	start := time.Now()
	_, err := config.LoadContext(t.Context(), doc(c.ListenAddrs()[0], "BOULEVARD_TEST_PW"), config.Wiring{},
		broker, config.BuildOptions[string]{Connect: newConnector(t, slog.New(slog.NewTextHandler(&logs, nil)))})
	if err == nil {
		t.Fatal("connected with a wrong password")
	}
	if !strings.Contains(err.Error(), "topics.orders.connection") {
		t.Fatalf("error %q does not name the connection path", err)
	}
	t.Logf("refused: %v", err)
	if took := time.Since(start); took > 25*time.Second {
		t.Fatalf("the refusal took %v", took)
	}
	for _, s := range []string{err.Error(), logs.String()} {
		if strings.Contains(s, password) {
			t.Fatalf("the password leaked: %s", s)
		}
	}
	if len(broker.Names()) != 0 {
		t.Fatalf("topics created: %v", broker.Names())
	}
}

// An unset secret, an unreadable CA or client certificate file, on either
// kind, is a connection error naming the setting, and makes no backend;
// so is a connection of an unknown kind, naming the connection.
func TestConnectionSettingsErrors(t *testing.T) {
	conn := newConnector(t, nil)
	t.Setenv("BOULEVARD_TEST_UNSET", "")
	unset := config.Secret{Env: "BOULEVARD_TEST_UNSET"}
	noCA := &config.TLSSpec{Enabled: true, CAFile: "/nonexistent/ca.pem"}
	kafka := func(name string) config.ConnectionSpec {
		return config.ConnectionSpec{Name: name, Path: "connections." + name, Kind: config.KindKafka, Brokers: []string{"127.0.0.1:1"}}
	}
	pulsar := func(name string) config.ConnectionSpec {
		return config.ConnectionSpec{Name: name, Path: "connections." + name, Kind: config.KindPulsar, ServiceURL: "pulsar+ssl://127.0.0.1:1"}
	}
	for _, tc := range []struct {
		name   string
		change func(*config.ConnectionSpec)
		want   string
		unset  bool // the error wraps config.ErrSecretUnset
	}{
		{"main", func(c *config.ConnectionSpec) {
			c.SASL = &config.SASLSpec{Mechanism: "SCRAM-SHA-512", Username: "svc", Password: unset}
		}, "connections.main.sasl.password_env", true},
		{"tls", func(c *config.ConnectionSpec) { c.TLS = noCA }, "connections.tls.tls.ca_file", false},
		{"cert", func(c *config.ConnectionSpec) {
			c.TLS = &config.TLSSpec{Enabled: true, CertFile: "/nonexistent/client.pem", KeyFile: "/nonexistent/client-key.pem"}
		}, "connections.cert.tls.cert_file", false},
		{"events", func(c *config.ConnectionSpec) { *c = pulsar(c.Name); c.Token = unset },
			"connections.events.token_env", true},
		{"audit", func(c *config.ConnectionSpec) { *c = pulsar(c.Name); c.TLS = noCA }, "connections.audit.tls.ca_file", false},
		{"queue", func(c *config.ConnectionSpec) { c.Kind = "rabbitmq" }, "connection queue has kind", false},
	} {
		c := kafka(tc.name)
		tc.change(&c)
		b, err := conn(t.Context(), c)
		if b != nil || !errors.Is(err, connector.ErrConnection) || errors.Is(err, config.ErrSecretUnset) != tc.unset ||
			!strings.Contains(fmt.Sprint(err), tc.want) {
			t.Errorf("connection %s: connector = %v, %v; want no backend and an ErrConnection naming %q (unset secret: %v)", tc.name, b, err, tc.want, tc.unset)
		}
	}
}

// A connector without a codec is refused, naming the field.
func TestConnectorNeedsCodec(t *testing.T) {
	_, err := connector.New(connector.Options[string]{})
	var es validate.Errors
	if !errors.As(err, &es) || !es.Has("connector.codec", "required") {
		t.Fatalf("New without codec = %v", err)
	}
	if err := (connector.Options[string]{}).Validate(); !errors.As(err, &es) || !es.Has("connector.codec", "required") {
		t.Fatalf("Validate without codec = %v", err)
	}
	if got := (connector.Options[string]{}).WithDefaults().Logger; got != slog.Default() {
		t.Fatalf("WithDefaults().Logger = %p, want slog.Default()", got)
	}
}

// A Pulsar connection's TLS settings all reach the client: with a private
// CA, a client certificate and a server name, the client trusts the
// broker's certificate and presents its own.
func TestPulsarConnectionUsesEveryTLSSetting(t *testing.T) {
	pki := newPKI(t)
	proxy := newTLSProxy(t, pki, testbroker.Pulsar(t).Addr().String())
	conn, err := connector.New(connector.Options[string]{
		Codec:  topic.StringCodec{},
		Logger: slog.New(slog.DiscardHandler),
		Pulsar: func(_ config.ConnectionSpec, o *pulsartopic.Options[string]) {
			o.ClientOptions.OperationTimeout = 2 * time.Second
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(`
connections:
  events:
    kind: pulsar
    service_url: pulsar+ssl://` + proxy.addr + `
    tls: {ca_file: ` + pki.caFile + `, cert_file: ` + pki.certFile + `, key_file: ` + pki.keyFile + `, server_name: ` + serverName + `}
`))
	if err != nil {
		t.Fatal(err)
	}
	be, err := conn(t.Context(), cfg.Connections["events"])
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = be.(*pulsartopic.Backend[string]).Close(context.Background()) }()
	// Declaring a topic looks up its partitions through the service URL.
	// (pulsartest's lookups answer no TLS broker URL, so what follows the
	// lookup fails whatever the TLS settings: only the handshake counts.)
	if h, err := topic.NewTopic[string]("audit", topic.Options{}, be); err == nil {
		h.Close()
	}
	passed, failed := proxy.outcome()
	if passed == 0 {
		t.Fatalf("no TLS handshake passed; failures: %v", failed)
	}
}

// Guarantee: connecting to a Kafka cluster that accepts connections and
// answers nothing returns by the context's deadline (far below the
// backend's default ConnectTimeout of 10s), with an error wrapping
// context.DeadlineExceeded and no backend, so that config.BuildContext's
// ctx bounds connecting as documented.
func TestKafkaConnectReturnsByItsDeadlineWhenTheClusterHangs(t *testing.T) {
	c := testbroker.Kafka(t)
	testbroker.HangKafka(t, c)
	conn, err := connector.New(connector.Options[string]{Codec: topic.StringCodec{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte("connections:\n  main:\n    kind: kafka\n    brokers: [" + c.ListenAddrs()[0] + "]\n"))
	if err != nil {
		t.Fatal(err)
	}
	testbroker.ReturnsByDeadline(t, "the connector", func(ctx context.Context) error {
		b, err := conn(ctx, cfg.Connections["main"])
		if err == nil {
			_ = b.(*kafkatopic.Backend[string]).Close(context.Background())
		} else if b != nil {
			t.Errorf("the connector failed (%v) and returned a backend %#v", err, b)
		}
		return err
	})
}

// Guarantee: a panic in Options.Kafka or Options.Pulsar is the
// connection's error, wrapping *message.PanicError and naming the field,
// instead of crashing the document's build (which would leave the
// backends it already made open).
func TestAdjustingFunctionPanicIsTheConnectionsError(t *testing.T) {
	conn, err := connector.New(connector.Options[string]{
		Codec:  topic.StringCodec{},
		Logger: slog.New(slog.DiscardHandler),
		Kafka:  func(config.ConnectionSpec, *kafkatopic.Options[string]) { panic("kafka tuning") },
		Pulsar: func(config.ConnectionSpec, *pulsartopic.Options[string]) { panic("pulsar tuning") },
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(`
connections:
  k: {kind: kafka, brokers: [127.0.0.1:1]}
  p: {kind: pulsar, service_url: pulsar://127.0.0.1:1}
`))
	if err != nil {
		t.Fatal(err)
	}
	for name, field := range map[string]string{"k": "Options.Kafka", "p": "Options.Pulsar"} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("connection %s: the connector panicked: %v", name, r)
				}
			}()
			b, err := conn(t.Context(), cfg.Connections[name])
			var pe *message.PanicError
			if b != nil || !errors.As(err, &pe) || !strings.Contains(err.Error(), field) {
				t.Errorf("connection %s: connector = %v, %v; want no backend and an error naming %s wrapping *message.PanicError", name, b, err, field)
			}
		}()
	}
}

// Guarantee: a Pulsar connection whose TLS settings its service URL would
// make the client ignore (pulsar://, on which pulsar-client-go connects in
// plaintext) makes no backend: the connector returns an error wrapping
// sources/pulsar's ErrTLSWithPlaintextURL instead of a backend that would
// connect without TLS. (config.Parse refuses such a document; this is a
// connection given to the connector directly.)
func TestPulsarConnectionWithTLSOnAPlaintextURLMakesNoBackend(t *testing.T) {
	pki := newPKI(t)
	conn, err := connector.New(connector.Options[string]{Codec: topic.StringCodec{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	be, err := conn(t.Context(), config.ConnectionSpec{Name: "events", Path: "connections.events", Kind: config.KindPulsar,
		ServiceURL: "pulsar://127.0.0.1:1", TLS: &config.TLSSpec{Enabled: true, CAFile: pki.caFile}})
	if err == nil {
		_ = be.(*pulsartopic.Backend[string]).Close(context.Background())
		t.Fatal("the connector made a backend that connects in plaintext")
	}
	if be != nil || !errors.Is(err, spulsar.ErrTLSWithPlaintextURL) {
		t.Fatalf("connector = %#v, %v; want no backend and an error wrapping ErrTLSWithPlaintextURL", be, err)
	}
}
