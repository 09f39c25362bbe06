package config

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"regexp"
	"strconv"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/internal/quote"
	"github.com/boulevard-go/boulevard/validate"
)

// Connection kinds, the backends that reach a broker through a connection.
const (
	// KindKafka is a connection to a Kafka cluster (package topic/kafkatopic).
	KindKafka = "kafka"
	// KindPulsar is a connection to a Pulsar cluster (package topic/pulsartopic).
	KindPulsar = "pulsar"
)

// MaxConnections is how many connections a document may declare: 64.
const MaxConnections = 64

// ConnectionSpec is one entry of connections.<name>: how to reach a Kafka or
// Pulsar cluster. Secrets are never written in the document: it names the
// environment variables that hold them (password_env, token_env), read when
// the topics are built, and no error or log line repeats their values.
type ConnectionSpec struct {
	// Name is the connection's name (the key under connections).
	Name string
	// Path is the connection's YAML path, for example "connections.main".
	Path string
	// Kind is "kafka" or "pulsar". Required.
	Kind string `validate:"required,oneof=kafka pulsar"`
	// Brokers are the Kafka bootstrap addresses, host:port (kafka only;
	// at least one, at most 64).
	Brokers []string `validate:"max=64"`
	// ServiceURL is the Pulsar service URL, pulsar://host:port or
	// pulsar+ssl://host:port (pulsar only), without user information (a
	// password or token is a secret: use token_env).
	ServiceURL string `name:"service_url"`
	// TLS configures TLS to the brokers; absent means plaintext (or, for
	// Pulsar, whatever the pulsar+ssl scheme implies). On a pulsar
	// connection, TLS enabled needs a pulsar+ssl:// service URL:
	// pulsar-client-go connects to a pulsar:// one in plaintext, whatever
	// the TLS settings.
	TLS *TLSSpec `name:"tls"`
	// SASL configures Kafka SASL authentication (kafka only).
	SASL *SASLSpec `name:"sasl"`
	// Token is the Pulsar authentication token, from the environment
	// variable named by token_env (pulsar only).
	Token Secret `name:"token_env"`
}

// TLSSpec is connections.<name>.tls. Files are PEM.
type TLSSpec struct {
	// Enabled turns TLS on. Default true once tls is present.
	Enabled bool
	// CAFile verifies the brokers' certificates; empty means the system pool.
	CAFile string `name:"ca_file"`
	// CertFile and KeyFile are the client certificate, for mutual TLS; both or neither.
	CertFile string `name:"cert_file" validate:"required_with=KeyFile"`
	KeyFile  string `name:"key_file" validate:"required_with=CertFile"`
	// ServerName overrides the name checked in the brokers' certificates.
	ServerName string `name:"server_name"`
	// InsecureSkipVerify turns off certificate checks (tests only).
	InsecureSkipVerify bool `name:"insecure_skip_verify"`
}

// SASLSpec is connections.<name>.sasl.
type SASLSpec struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512. Required.
	Mechanism string `validate:"required,oneof=PLAIN SCRAM-SHA-256 SCRAM-SHA-512"`
	// Username is the SASL user. Required.
	Username string `validate:"required"`
	// Password is read from the environment variable named by password_env.
	Password Secret `name:"password_env"`
}

// Secret is a credential held in an environment variable. Its String,
// GoString and LogValue name the variable, never the value.
type Secret struct {
	// Env is the environment variable's name; empty means no secret.
	Env string
}

// envName is what an environment variable name may be.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// ErrSecretUnset is wrapped by the error of [Secret.Value] when the
// environment variable is not set or empty.
var ErrSecretUnset = errors.New("config: secret environment variable is not set")

// Value reads the secret from its environment variable. An unset or
// empty variable is an error wrapping ErrSecretUnset that names the
// variable (not the value); an empty Env is "", nil.
func (s Secret) Value() (string, error) {
	if s.Env == "" {
		return "", nil
	}
	v := os.Getenv(s.Env)
	if v == "" {
		return "", fmt.Errorf("%w: %s", ErrSecretUnset, quote.Value(s.Env))
	}
	return v, nil
}

// String returns "$NAME" (the variable, never its value), or "" for no secret.
func (s Secret) String() string {
	if s.Env == "" {
		return ""
	}
	return "$" + s.Env
}

// GoString is String, so that %#v does not print more.
func (s Secret) GoString() string { return s.String() }

// LogValue logs the variable's name only.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// Connector makes the backend for a connection: called by [BuildContext]
// once per connection that a topic uses, with the validated connection. It
// must return a backend whose Name is the connection's Kind. Package
// topic/connector makes them for Kafka and Pulsar.
type Connector[T any] func(ctx context.Context, c ConnectionSpec) (topic.Backend[T], error)

type rawConnection struct {
	Kind       *string  `yaml:"kind"`
	Brokers    []string `yaml:"brokers"`
	ServiceURL *string  `yaml:"service_url"`
	TLS        *rawTLS  `yaml:"tls"`
	SASL       *rawSASL `yaml:"sasl"`
	TokenEnv   *string  `yaml:"token_env"`
}

type rawTLS struct {
	Enabled            *bool   `yaml:"enabled"`
	CAFile             *string `yaml:"ca_file"`
	CertFile           *string `yaml:"cert_file"`
	KeyFile            *string `yaml:"key_file"`
	ServerName         *string `yaml:"server_name"`
	InsecureSkipVerify *bool   `yaml:"insecure_skip_verify"`
}

type rawSASL struct {
	Mechanism   *string `yaml:"mechanism"`
	Username    *string `yaml:"username"`
	PasswordEnv *string `yaml:"password_env"`
}

type rawDefaults struct {
	Backend    *string `yaml:"backend"`
	Connection *string `yaml:"connection"`
}

// buildConnection fills and validates connections.<name>.
func buildConnection(path, name string, r *rawConnection) (ConnectionSpec, error) {
	c := ConnectionSpec{Name: name, Path: path}
	var errs []error
	if r != nil {
		setString(&c.Kind, r.Kind)
		c.Brokers = r.Brokers
		setString(&c.ServiceURL, r.ServiceURL)
		if r.TokenEnv != nil {
			c.Token = Secret{Env: *r.TokenEnv}
		}
		if t := r.TLS; t != nil {
			c.TLS = &TLSSpec{Enabled: true}
			if t.Enabled != nil {
				c.TLS.Enabled = *t.Enabled
			}
			setString(&c.TLS.CAFile, t.CAFile)
			setString(&c.TLS.CertFile, t.CertFile)
			setString(&c.TLS.KeyFile, t.KeyFile)
			setString(&c.TLS.ServerName, t.ServerName)
			if t.InsecureSkipVerify != nil {
				c.TLS.InsecureSkipVerify = *t.InsecureSkipVerify
			}
		}
		if s := r.SASL; s != nil {
			c.SASL = &SASLSpec{}
			setString(&c.SASL.Mechanism, s.Mechanism)
			setString(&c.SASL.Username, s.Username)
			if s.PasswordEnv != nil {
				c.SASL.Password = Secret{Env: *s.PasswordEnv}
			}
		}
	}
	errs = append(errs, validate.Struct(path, &c))
	field := func(key, rule, msg string) { errs = append(errs, validate.Field(path+"."+key, rule, msg)) }
	switch c.Kind {
	case KindKafka:
		if len(c.Brokers) == 0 {
			field("brokers", "required", "is required for a kafka connection")
		}
		for i, b := range c.Brokers {
			if host, port, err := net.SplitHostPort(b); err != nil || host == "" || !validPort(port) {
				field("brokers."+strconv.Itoa(i), "hostport", "must be host:port, not "+quote.URL(b))
			}
		}
		if c.ServiceURL != "" {
			field("service_url", "excluded_with", "is for pulsar connections, not kafka")
		}
		if c.Token.Env != "" {
			field("token_env", "excluded_with", "is for pulsar connections, not kafka (kafka uses sasl)")
		}
		if c.SASL != nil && c.SASL.Password.Env == "" {
			field("sasl.password_env", "required", "is required: name the environment variable that holds the password")
		}
	case KindPulsar:
		if c.ServiceURL == "" {
			field("service_url", "required", "is required for a pulsar connection")
		} else if u, err := url.Parse(c.ServiceURL); err != nil || (u.Scheme != "pulsar" && u.Scheme != "pulsar+ssl") || u.Host == "" {
			field("service_url", "url", "must be pulsar://host:port or pulsar+ssl://host:port, not "+quote.URL(c.ServiceURL))
		} else {
			if u.User != nil {
				field("service_url", "no_userinfo", "must not hold user information (a password or token written in the document): "+
					"name the token's environment variable in token_env; got "+quote.URL(c.ServiceURL))
			}
			// pulsar-client-go connects to a pulsar:// URL in plaintext,
			// whatever its TLS settings.
			if c.TLS != nil && c.TLS.Enabled && u.Scheme != "pulsar+ssl" {
				field("tls", "scheme", "needs a pulsar+ssl:// service_url: on "+u.Scheme+
					":// pulsar-client-go connects in plaintext and ignores the TLS settings")
			}
		}
		if len(c.Brokers) > 0 {
			field("brokers", "excluded_with", "is for kafka connections, not pulsar (pulsar uses service_url)")
		}
		if c.SASL != nil {
			field("sasl", "excluded_with", "is for kafka connections, not pulsar (pulsar uses token_env)")
		}
	}
	for key, s := range map[string]Secret{"token_env": c.Token, "sasl.password_env": saslPassword(c.SASL)} {
		if s.Env != "" && !envName.MatchString(s.Env) {
			// The value is not repeated: it may be the secret itself,
			// written where its variable's name belongs.
			field(key, "env_name", "must be an environment variable name (letters, digits and _, not starting with a digit, "+
				"at most 128), naming the variable that holds the secret, not the secret itself")
		}
	}
	return c, validate.Join(errs...)
}

func saslPassword(s *SASLSpec) Secret {
	if s == nil {
		return Secret{}
	}
	return s.Password
}

func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n > 0 && n < 65536
}

// checkConnections checks every topic's backend and connection against
// the declared connections: a kafka or pulsar topic names a connection of
// its kind; an in-memory topic names none.
func checkConnections(cfg *Config) error {
	var errs problems
	check := func(path string, s TopicSpec) {
		switch s.Backend {
		case KindKafka, KindPulsar:
			c, ok := cfg.Connections[s.Connection]
			switch {
			case s.Connection == "":
				errs.add(validate.Field(path+".connection", "required",
					"is required for backend "+s.Backend+": name one of connections (or set defaults.connection)"))
			case !ok:
				errs.add(validate.Field(path+".connection", "known",
					"names no declared connection: "+quote.Value(s.Connection)))
			case c.Kind != s.Backend:
				errs.add(validate.Field(path+".connection", "kind",
					fmt.Sprintf("names %s, a %s connection, but the topic's backend is %s", topic.SafeName(c.Name), c.Kind, s.Backend)))
			}
		default:
			if s.Connection != "" && s.Backend == DefaultBackend {
				errs.add(validate.Field(path+".connection", "excluded_with",
					"must not be set for backend in_memory"))
			}
		}
	}
	for _, name := range sortedKeys(cfg.Topics) {
		check("topics."+topic.SafeName(name), cfg.Topics[name])
	}
	for _, g := range sortedKeys(cfg.Groups) {
		for _, name := range sortedKeys(cfg.Groups[g].Topics) {
			check("groups."+topic.SafeName(g)+".topics."+topic.SafeName(name), cfg.Groups[g].Topics[name])
		}
	}
	return errs.err()
}
