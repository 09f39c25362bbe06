package connector_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/config"
	"github.com/boulevard-go/boulevard/topic/connector"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
	"github.com/boulevard-go/boulevard/topic/pulsartopic"
)

// errCaptured stops the connector once the adjusting function has seen the
// backend's options: a panic there is the connection's error, so nothing
// dials.
const errCaptured = "options captured"

// The connection's brokers, TLS, SASL, token, key and logger settings
// reach the options of the backend the connector makes (as the adjusting
// functions see them), TLS at version 1.2 or later, trusting only the CA
// file's certificates, and only when enabled; printed, they show no
// secret.
func TestConnectionSettingsReachTheBackendOptions(t *testing.T) {
	pki := newPKI(t)
	t.Setenv("BOULEVARD_TEST_PW", password)
	t.Setenv("BOULEVARD_TEST_TOKEN", "token-value")
	kafkaOpts := map[string]kafkatopic.Options[string]{}
	pulsarOpts := map[string]pulsartopic.Options[string]{}
	log := slog.New(slog.DiscardHandler)
	conn, err := connector.New(connector.Options[string]{
		Codec:     topic.StringCodec{},
		Logger:    log,
		KafkaKey:  func(s string) []byte { return []byte("kafka-" + s) },
		PulsarKey: func(s string) string { return "pulsar-" + s },
		Kafka: func(c config.ConnectionSpec, o *kafkatopic.Options[string]) {
			kafkaOpts[c.Name] = *o
			panic(errCaptured)
		},
		Pulsar: func(c config.ConnectionSpec, o *pulsartopic.Options[string]) {
			pulsarOpts[c.Name] = *o
			panic(errCaptured)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(`
connections:
  secure:
    kind: kafka
    brokers: [127.0.0.1:1, 127.0.0.1:2]
    tls: {ca_file: ` + pki.caFile + `, server_name: ` + serverName + `}
    sasl: {mechanism: SCRAM-SHA-256, username: svc, password_env: BOULEVARD_TEST_PW}
  plain:
    kind: kafka
    brokers: [127.0.0.1:1]
    tls: {enabled: false, ca_file: /nonexistent/ca.pem}
  trusting:
    kind: kafka
    brokers: [127.0.0.1:1]
    tls: {insecure_skip_verify: true}
  events:
    kind: pulsar
    service_url: pulsar+ssl://127.0.0.1:1
    tls: {ca_file: ` + pki.caFile + `}
    token_env: BOULEVARD_TEST_TOKEN
  quiet:
    kind: pulsar
    service_url: pulsar://127.0.0.1:1
    tls: {enabled: false, ca_file: /nonexistent/ca.pem}
`))
	if err != nil {
		t.Fatal(err)
	}
	for name := range cfg.Connections {
		if b, err := conn(t.Context(), cfg.Connections[name]); b != nil || err == nil || !strings.Contains(err.Error(), errCaptured) {
			t.Fatalf("connection %s: connector = %v, %v; want the adjusting function's panic", name, b, err)
		}
	}
	checkTLS := func(name string, tc *tls.Config, wantServerName string) {
		t.Helper()
		if tc == nil {
			t.Errorf("connection %s: no TLS config", name)
			return
		}
		if tc.MinVersion != tls.VersionTLS12 || !tc.RootCAs.Equal(pki.pool) || tc.InsecureSkipVerify || tc.ServerName != wantServerName {
			t.Errorf("connection %s: TLS min version %#x, trusts only the CA file %v, skips verification %v, server name %q; want TLS 1.2 or later verifying with the CA file's certificate only, server name %q",
				name, tc.MinVersion, tc.RootCAs.Equal(pki.pool), tc.InsecureSkipVerify, tc.ServerName, wantServerName)
		}
	}

	secure := kafkaOpts["secure"]
	if !slices.Equal(secure.Brokers, []string{"127.0.0.1:1", "127.0.0.1:2"}) {
		t.Errorf("connection secure: brokers %q, want both of the connection's", secure.Brokers)
	}
	if !secure.Config.Net.TLS.Enable {
		t.Errorf("connection secure: TLS not enabled")
	}
	checkTLS("secure", secure.Config.Net.TLS.Config, serverName)
	sasl := secure.Config.Net.SASL
	if !sasl.Enable || sasl.Mechanism != sarama.SASLTypeSCRAMSHA256 || sasl.User != "svc" || sasl.Password != password || sasl.SCRAMClientGeneratorFunc == nil {
		t.Errorf("connection secure: SASL enable %v mechanism %q user %q, password from the environment %v; want SCRAM-SHA-256 as svc",
			sasl.Enable, sasl.Mechanism, sasl.User, sasl.Password == password)
	}
	if secure.Key == nil || string(secure.Key("v")) != "kafka-v" {
		t.Errorf("connection secure: the record key is not Options.KafkaKey")
	}
	if plain := kafkaOpts["plain"]; plain.Config.Net.TLS.Enable || plain.Config.Net.SASL.Enable {
		t.Errorf("connection plain: TLS %v, SASL %v; want neither", plain.Config.Net.TLS.Enable, plain.Config.Net.SASL.Enable)
	}
	if tc := kafkaOpts["trusting"].Config.Net.TLS.Config; tc == nil || !tc.InsecureSkipVerify {
		t.Errorf("connection trusting: certificate checks on (TLS config %p); the document turns them off", tc)
	}

	events := pulsarOpts["events"]
	checkTLS("events", events.ClientOptions.TLSConfig, "")
	if tok, ok := events.ClientOptions.Authentication.(interface{ GetData() ([]byte, error) }); !ok {
		t.Errorf("connection events: authentication %T, want the token", events.ClientOptions.Authentication)
	} else if data, err := tok.GetData(); err != nil || string(data) != "token-value" {
		t.Errorf("connection events: the token sent is not the value of token_env (%v)", err)
	}
	if events.Key == nil || events.Key("v") != "pulsar-v" {
		t.Errorf("connection events: the message key is not Options.PulsarKey")
	}
	if quiet := pulsarOpts["quiet"]; quiet.ClientOptions.TLSConfig != nil || quiet.ClientOptions.Authentication != nil {
		t.Errorf("connection quiet: TLS config %+v, authentication %v; want neither", quiet.ClientOptions.TLSConfig, quiet.ClientOptions.Authentication)
	}
	for name, printed := range map[string]string{
		"secure": fmt.Sprintf("%v %+v %#v", secure, secure, secure),
		"events": fmt.Sprintf("%v %+v %#v", events, events, events),
	} {
		if strings.Contains(printed, password) || strings.Contains(printed, "token-value") {
			t.Errorf("connection %s: the printed options hold a secret: %s", name, printed)
		}
	}
	if secure.Logger != log || events.Logger != log {
		t.Errorf("the backends log to %p (Kafka) and %p (Pulsar), want Options.Logger %p", secure.Logger, events.Logger, log)
	}
}

// Each SASL mechanism a document may name authenticates to a cluster that
// knows the user under that mechanism.
func TestKafkaConnectionAuthenticatesWithEveryMechanism(t *testing.T) {
	t.Setenv("BOULEVARD_TEST_PW", password)
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
		t.Run(mech, func(t *testing.T) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser(mech, "svc", password))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			cfg, err := config.Parse([]byte(`
connections:
  main:
    kind: kafka
    brokers: [` + c.ListenAddrs()[0] + `]
    sasl: {mechanism: ` + mech + `, username: svc, password_env: BOULEVARD_TEST_PW}
`))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			b, err := newConnector(t, slog.New(slog.DiscardHandler))(ctx, cfg.Connections["main"])
			if err != nil {
				t.Fatalf("connecting with %s: %v", mech, err)
			}
			if err := b.(*kafkatopic.Backend[string]).Close(context.Background()); err != nil {
				t.Fatalf("Close: %v", err)
			}
		})
	}
}

// A connector called with an ended context makes no backend; a CA file
// without a PEM certificate is a connection error naming the setting.
func TestConnectorRefusesWhatItCannotConnect(t *testing.T) {
	conn, err := connector.New(connector.Options[string]{Codec: topic.StringCodec{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	pulsarConn := config.ConnectionSpec{Name: "events", Path: "connections.events", Kind: config.KindPulsar, ServiceURL: "pulsar://127.0.0.1:1"}
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	if b, err := conn(ended, pulsarConn); b != nil || !errors.Is(err, context.Canceled) {
		if b != nil {
			_ = b.(*pulsartopic.Backend[string]).Close(context.Background())
		}
		t.Errorf("connector with an ended context = %v, %v; want no backend and context.Canceled", b, err)
	}
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	withCA := config.ConnectionSpec{Name: "k", Path: "connections.k", Kind: config.KindKafka, Brokers: []string{"127.0.0.1:1"},
		TLS: &config.TLSSpec{Enabled: true, CAFile: notPEM}}
	if b, err := conn(t.Context(), withCA); b != nil || !errors.Is(err, connector.ErrConnection) ||
		!strings.Contains(err.Error(), "connections.k.tls.ca_file: no PEM certificate") {
		t.Errorf("connector with a CA file holding no certificate = %v, %v; want ErrConnection naming connections.k.tls.ca_file", b, err)
	}
}

// What Options.Kafka and Options.Pulsar set reaches the backend the
// connector makes: a Kafka backend's partitions, a Pulsar backend's
// tenant and namespace.
func TestAdjustingFunctionsReachTheBackends(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	conn, err := connector.New(connector.Options[string]{
		Codec:  topic.StringCodec{},
		Logger: slog.New(slog.DiscardHandler),
		Kafka:  func(_ config.ConnectionSpec, o *kafkatopic.Options[string]) { o.Partitions = 3 },
		Pulsar: func(_ config.ConnectionSpec, o *pulsartopic.Options[string]) {
			o.Tenant, o.Namespace = "acme", "billing"
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	kb, err := conn(ctx, config.ConnectionSpec{Name: "k", Path: "connections.k", Kind: config.KindKafka, Brokers: c.ListenAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = kb.(*kafkatopic.Backend[string]).Close(context.Background()) }()
	if s := fmt.Sprint(kb); !strings.Contains(s, "Partitions:3 ") {
		t.Errorf("the Kafka backend %s does not have the partitions Options.Kafka set", s)
	}
	pb, err := conn(ctx, config.ConnectionSpec{Name: "p", Path: "connections.p", Kind: config.KindPulsar, ServiceURL: "pulsar://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pb.(*pulsartopic.Backend[string]).Close(context.Background()) }()
	if got := pb.(*pulsartopic.Backend[string]).TopicName("audit"); got != "persistent://acme/billing/audit" {
		t.Errorf("the Pulsar backend names topic audit %q, want it in the tenant and namespace Options.Pulsar set", got)
	}
}
