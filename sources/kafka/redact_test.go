package kafka_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/sources/kafka"
)

// secretToken is an OAuth token provider holding a secret.
type secretToken struct{ Secret string }

func (s secretToken) Token() (*sarama.AccessToken, error) {
	return &sarama.AccessToken{Token: s.Secret}, nil
}

// fakeKey stands for a TLS private key.
type fakeKey struct{ D string }

// Guarantee: the options (and the source) never print a credential of
// their sarama config — SASL user and password, SCRAM authorisation id,
// OAuth token, TLS private key — with any fmt verb, through slog's text
// and JSON handlers, or as a field of the user's own structure.
func TestOptionsRedactCredentials(t *testing.T) {
	secrets := []string{"alice-sasl-user", "s3cr3t-sasl-password", "scram-authz-secret", "oauth-token-secret", "tls-private-key-secret"}
	for _, mech := range []sarama.SASLMechanism{sarama.SASLTypePlaintext, sarama.SASLTypeSCRAMSHA512, sarama.SASLTypeOAuth} {
		t.Run(string(mech), func(t *testing.T) {
			cfg := sarama.NewConfig()
			cfg.Version = sarama.V3_0_0_0
			cfg.ClientID = "billing"
			cfg.Net.SASL.Enable = true
			cfg.Net.SASL.Mechanism = mech
			cfg.Net.SASL.User = secrets[0]
			cfg.Net.SASL.Password = secrets[1]
			cfg.Net.SASL.SCRAMAuthzID = secrets[2]
			cfg.Net.SASL.TokenProvider = secretToken{Secret: secrets[3]}
			cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return nil }
			cfg.Net.TLS.Enable = true
			cfg.Net.TLS.Config = &tls.Config{Certificates: []tls.Certificate{{PrivateKey: fakeKey{D: secrets[4]}}}}
			opts := kafka.Options{
				Brokers: []string{"127.0.0.1:9092"}, GroupID: "g", Topics: []string{"orders"},
				RevokeTimeout: time.Second, Config: cfg,
			}
			src, err := kafka.New(opts)
			if err != nil {
				t.Fatal(err)
			}
			withDefaults := src.Options()
			type holder struct {
				Name  string
				Kafka kafka.Options
			}
			var printed []string
			for _, v := range []any{opts, &opts, withDefaults, src, holder{"app", opts}, []kafka.Options{opts}} {
				for _, verb := range []string{"%v", "%+v", "%s", "%q", "%#v", "%x", "%d"} {
					printed = append(printed, fmt.Sprintf(verb, v))
				}
				var text, js bytes.Buffer
				slog.New(slog.NewTextHandler(&text, nil)).Info("options", slog.Any("opts", v))
				slog.New(slog.NewJSONHandler(&js, nil)).Info("options", slog.Any("opts", v))
				printed = append(printed, text.String(), js.String())
				b, err := json.Marshal(v)
				if err != nil {
					t.Fatalf("%T does not encode as JSON: %v", v, err)
				}
				printed = append(printed, string(b))
			}
			printed = append(printed, opts.String(), opts.GoString(), src.String(), src.GoString())
			for _, out := range printed {
				for _, s := range secrets {
					if strings.Contains(out, s) {
						t.Fatalf("a credential is printed: %s", out)
					}
				}
			}
			// What is printed still describes the options.
			for _, want := range []string{"127.0.0.1:9092", "orders", "billing", string(mech)} {
				if !strings.Contains(fmt.Sprint(opts), want) {
					t.Errorf("%q missing from %v", want, opts)
				}
			}
		})
	}
}

// Guarantee: the options and the source print their String with every
// fmt verb, quoted for %q, as a string would be.
func TestOptionsAndSourcePrintTheirStringWithEveryVerb(t *testing.T) {
	opts := kafka.Options{Brokers: []string{"b:9092"}, GroupID: "g", Topics: []string{"t"}, Config: sarama.NewConfig()}
	src, err := kafka.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []fmt.Stringer{opts, src} {
		for _, verb := range []string{"%v", "%+v", "%s", "%q", "%#v", "%x", "%d"} {
			want := v.String()
			if verb == "%q" {
				want = strconv.Quote(want)
			}
			if got := fmt.Sprintf(verb, v); got != want {
				t.Errorf("%T printed with %s = %s, want %s", v, verb, got, want)
			}
		}
	}
}

// Guarantee: LogValue gives the options as attributes a handler can
// filter on (not one opaque string).
func TestOptionsLogValue(t *testing.T) {
	var js bytes.Buffer
	opts := kafka.Options{Brokers: []string{"b:9092"}, GroupID: "g", Topics: []string{"t"}, Config: sarama.NewConfig()}
	slog.New(slog.NewJSONHandler(&js, nil)).LogAttrs(context.Background(), slog.LevelInfo, "x", slog.Any("opts", opts))
	var got struct {
		Opts struct {
			GroupID string         `json:"group_id"`
			Config  map[string]any `json:"config"`
		} `json:"opts"`
	}
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Opts.GroupID != "g" || got.Opts.Config["sasl"] != false {
		t.Fatalf("options logged as %s", js.String())
	}
}
