// Package connector makes the Kafka and Pulsar topic backends of a topic
// document's connections (package topic/config): give [New]'s result to
// config.BuildOptions.Connect, and the topics a document puts on
// "kafka" or "pulsar" are created through packages topic/kafkatopic and
// topic/pulsartopic with the connection's brokers or service URL, TLS
// files, SASL credentials or token.
//
// The context the connector is called with bounds connecting: a Kafka
// backend's first contact with its cluster returns by the context's
// deadline (kafkatopic.NewContext); a Pulsar client connects lazily.
//
// Secrets are read from their environment variables when a connection is
// made, and appear in no error or log line.
//
// A Pulsar connection with TLS enabled needs a pulsar+ssl:// service URL:
// on pulsar:// pulsar-client-go connects in plaintext whatever the TLS
// settings. config.Parse refuses such a document, and a connection given
// to the connector directly fails with an error wrapping
// sources/pulsar's ErrTLSWithPlaintextURL.
package connector

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/IBM/sarama"
	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/xdg-go/scram"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/config"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
	"github.com/boulevard-go/boulevard/topic/pulsartopic"
	"github.com/boulevard-go/boulevard/validate"
)

// Options configures the backends [New] makes. Codec is required.
type Options[T any] struct {
	// Codec turns values into payloads and back, on both kinds.
	Codec topic.Codec[T] `validate:"required"`
	// KafkaKey gives each Kafka record its key (records of one key keep
	// their order). Nil: no key.
	KafkaKey func(T) []byte `name:"-"`
	// PulsarKey gives each Pulsar message its key (balanced groups then
	// subscribe Key_Shared). Nil: no key.
	PulsarKey func(T) string `name:"-"`
	// Kafka, when set, adjusts the options of each Kafka backend before it
	// is made (partitions, replication, timeouts, sarama tuning). Brokers,
	// TLS and SASL come from the connection. A panic in it is the
	// connection's error, wrapping a *message.PanicError.
	Kafka func(c config.ConnectionSpec, o *kafkatopic.Options[T]) `name:"-"`
	// Pulsar, when set, adjusts the options of each Pulsar backend before
	// it is made. The service URL, TLS and token come from the connection.
	// A panic in it is the connection's error, as for Kafka.
	Pulsar func(c config.ConnectionSpec, o *pulsartopic.Options[T]) `name:"-"`
	// Logger is given to the backends. Nil means slog.Default().
	Logger *slog.Logger `name:"-"`
}

// WithDefaults returns o with a nil Logger replaced by slog.Default().
func (o Options[T]) WithDefaults() Options[T] {
	o.Logger = cmp.Or(o.Logger, slog.Default())
	return o
}

// Validate returns nil or a validate.Errors naming every broken rule
// ("connector.codec is required"). New calls it.
func (o Options[T]) Validate() error { return validate.Struct("connector", &o) }

// ErrConnection is wrapped by the errors of the connector about a
// connection's settings (a TLS file that cannot be read, an unset secret).
var ErrConnection = errors.New("connector: bad connection settings")

// New validates opts and returns a connector for config.BuildOptions.
// Invalid options are a validate.Errors naming the field.
func New[T any](opts Options[T]) (config.Connector[T], error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.WithDefaults()
	return func(ctx context.Context, c config.ConnectionSpec) (topic.Backend[T], error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		switch c.Kind {
		case config.KindKafka:
			return kafka(ctx, c, opts)
		case config.KindPulsar:
			return pulsarBackend(c, opts)
		}
		return nil, fmt.Errorf("%w: connection %s has kind %q", ErrConnection, topic.SafeName(c.Name), c.Kind)
	}, nil
}

func kafka[T any](ctx context.Context, c config.ConnectionSpec, opts Options[T]) (topic.Backend[T], error) {
	cfg := sarama.NewConfig()
	if c.TLS != nil && c.TLS.Enabled {
		tc, err := tlsConfig(c)
		if err != nil {
			return nil, err
		}
		cfg.Net.TLS.Enable, cfg.Net.TLS.Config = true, tc
	}
	if s := c.SASL; s != nil {
		pw, err := s.Password.Value()
		if err != nil {
			return nil, fmt.Errorf("%w: %s.sasl.password_env: %w", ErrConnection, c.Path, err)
		}
		cfg.Net.SASL.Enable = true
		cfg.Net.SASL.Handshake = true
		cfg.Net.SASL.User, cfg.Net.SASL.Password = s.Username, pw
		switch s.Mechanism {
		case "PLAIN":
			cfg.Net.SASL.Mechanism = sarama.SASLTypePlaintext
		case "SCRAM-SHA-256":
			cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
			cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{gen: scram.SHA256} }
		case "SCRAM-SHA-512":
			cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
			cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{gen: scram.SHA512} }
		}
	}
	o := kafkatopic.Options[T]{Brokers: c.Brokers, Config: cfg, Codec: opts.Codec, Key: opts.KafkaKey, Logger: opts.Logger}
	if opts.Kafka != nil {
		if err := adjust(c, "Kafka", func() { opts.Kafka(c, &o) }); err != nil {
			return nil, err
		}
	}
	b, err := kafkatopic.NewContext(ctx, o)
	if err != nil {
		return nil, err
	}
	return b, nil
}

func pulsarBackend[T any](c config.ConnectionSpec, opts Options[T]) (topic.Backend[T], error) {
	o := pulsartopic.Options[T]{ServiceURL: c.ServiceURL, Codec: opts.Codec, Key: opts.PulsarKey, Logger: opts.Logger}
	if c.TLS != nil && c.TLS.Enabled {
		// One tls.Config with every setting: pulsar-client-go ignores its
		// TLS file and hostname options once TLSConfig is set, which a
		// server name needs.
		tc, err := tlsConfig(c)
		if err != nil {
			return nil, err
		}
		o.ClientOptions.TLSConfig = tc
	}
	if c.Token.Env != "" {
		tok, err := c.Token.Value()
		if err != nil {
			return nil, fmt.Errorf("%w: %s.token_env: %w", ErrConnection, c.Path, err)
		}
		o.ClientOptions.Authentication = pulsar.NewAuthenticationToken(tok)
	}
	if opts.Pulsar != nil {
		if err := adjust(c, "Pulsar", func() { opts.Pulsar(c, &o) }); err != nil {
			return nil, err
		}
	}
	b, err := pulsartopic.New(o)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// adjust calls the Options.Kafka or Options.Pulsar function (field) in
// call, returning its panic as an error wrapping a *message.PanicError.
func adjust(c config.ConnectionSpec, field string, call func()) (err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("connector: Options.%s for connection %s: %w", field, topic.SafeName(c.Name), err)
		}
	}()
	defer message.Recover(&err)
	call()
	return nil
}

// tlsConfig reads the connection's CA and client certificate files.
func tlsConfig(c config.ConnectionSpec) (*tls.Config, error) {
	t := c.TLS
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify} //nolint:gosec // an explicit, documented choice of the document
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%w: %s.tls.ca_file: %w", ErrConnection, c.Path, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: %s.tls.ca_file: no PEM certificate in %q", ErrConnection, c.Path, t.CAFile)
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: %s.tls.cert_file: %w", ErrConnection, c.Path, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// scramClient is sarama's SCRAM conversation on github.com/xdg-go/scram.
type scramClient struct {
	gen  scram.HashGeneratorFcn
	conv *scram.ClientConversation
}

func (s *scramClient) Begin(user, password, authzID string) error {
	c, err := s.gen.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	s.conv = c.NewConversation()
	return nil
}

func (s *scramClient) Step(challenge string) (string, error) { return s.conv.Step(challenge) }

func (s *scramClient) Done() bool { return s.conv.Done() }
