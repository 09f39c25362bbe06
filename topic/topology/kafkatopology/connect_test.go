package kafkatopology

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/testnet"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
	"github.com/boulevard-go/boulevard/validate"
)

// connectOptions are options for brokers with sarama's own timeouts (30s
// per dial and read, three metadata retries) left as they are.
func connectOptions(brokers ...string) Options[topologytest.Msg] {
	return Options[topologytest.Msg]{Brokers: brokers, Codec: topic.JSONCodec[topologytest.Msg]{},
		Logger: slog.New(slog.DiscardHandler)}
}

// Guarantee: New against a broker that cannot be reached (one that
// accepts connections and never answers, nothing listening, or something
// other than a broker answering) returns within a few ConnectTimeouts,
// long before sarama's own 30s timeouts would let it, with an error
// wrapping ErrConnect that names the broker and the cause.
func TestNewFailsWithinItsConnectTimeoutNamingTheBrokerAndTheCause(t *testing.T) {
	for _, tc := range testbroker.UnreachableKafka {
		t.Run(tc.Name, func(t *testing.T) {
			done := make(chan error, 1)
			// Registered before the listener: runs after its cleanup has
			// cut the connections, so that a New still running ends and
			// is waited for.
			t.Cleanup(func() { <-done })
			addr := tc.Addr(t)
			o := connectOptions(addr)
			o.ConnectTimeout = 300 * time.Millisecond
			start := time.Now()
			go func() {
				b, err := New(o)
				if err == nil {
					_ = b.Close(context.Background())
				}
				done <- err
			}()
			const patience = 10 * time.Second
			select {
			case err := <-done:
				done <- err // for the cleanup
				if !errors.Is(err, ErrConnect) {
					t.Fatalf("New = %v, want an error wrapping ErrConnect", err)
				}
				for _, want := range []string{addr, tc.Cause} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("New's error %q does not name %s", err, want)
					}
				}
				t.Logf("New returned after %s: %v", time.Since(start).Round(time.Millisecond), err)
			case <-time.After(patience):
				t.Fatalf("New against %s still runs after %s, with ConnectTimeout %s", tc.Name, patience, o.ConnectTimeout)
			}
		})
	}
}

// Guarantee: NewContext against a broker that accepts connections and
// never answers returns by ctx's deadline, far below ConnectTimeout, with
// an error wrapping both ErrConnect and context.DeadlineExceeded.
func TestNewContextReturnsByItsDeadlineWhenTheBrokerNeverAnswers(t *testing.T) {
	o := connectOptions(testnet.SilentListener(t))
	o.ConnectTimeout = time.Minute
	newContextReturnsByDeadline(t, o)
}

// Guarantee: NewContext against a cluster that answers the first contact
// and then leaves the client's metadata request unanswered returns by
// ctx's deadline too, with an error wrapping both ErrConnect and
// context.DeadlineExceeded, instead of waiting for sarama's read timeout
// (30s for each of four attempts).
func TestNewContextReturnsByItsDeadlineWhenTheMetadataIsNeverAnswered(t *testing.T) {
	c := testbroker.Kafka(t)
	testbroker.HangKafkaKey(t, c, kmsg.Metadata)
	o := connectOptions(c.ListenAddrs()...)
	o.ConnectTimeout = time.Minute
	newContextReturnsByDeadline(t, o)
}

// newContextReturnsByDeadline checks that NewContext with o returns by its
// context's deadline with an error wrapping ErrConnect and
// context.DeadlineExceeded.
func newContextReturnsByDeadline(t *testing.T, o Options[topologytest.Msg]) {
	t.Helper()
	testbroker.ReturnsByDeadline(t, "NewContext", func(ctx context.Context) error {
		b, err := NewContext(ctx, o)
		if err == nil {
			_ = b.Close(context.Background())
		} else if !errors.Is(err, ErrConnect) {
			t.Errorf("NewContext = %v, want an error wrapping ErrConnect", err)
		}
		return err
	})
}

// Guarantee: NewContext with a context already cancelled makes no backend,
// even on a cluster that answers: it returns an error wrapping ErrConnect
// and context.Canceled.
func TestNewContextWithACancelledContextMakesNoBackend(t *testing.T) {
	o := connectOptions(testbroker.Kafka(t).ListenAddrs()...)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	b, err := NewContext(ctx, o)
	if err == nil {
		topologytest.MustClose(t, "the backend", b.Close)
		t.Fatal("NewContext with a cancelled context made a backend")
	}
	if !errors.Is(err, ErrConnect) || !errors.Is(err, context.Canceled) {
		t.Fatalf("NewContext = %v, want an error wrapping ErrConnect and context.Canceled", err)
	}
}

// Guarantee: Declare with a context already cancelled declares nothing:
// it returns an error wrapping ErrAdmin and context.Canceled, and the
// topic is not made.
func TestDeclareWithACancelledContextDeclaresNothing(t *testing.T) {
	c := testbroker.Kafka(t)
	b := newBackend(t, c.ListenAddrs())
	top, err := topology.New("cancelled-declare").Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := b.Declare(ctx, top); !errors.Is(err, ErrAdmin) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Declare = %v, want an error wrapping ErrAdmin and context.Canceled", err)
	}
	if p := c.PartitionInfo(kafkaName("cancelled-declare"), 0); p != nil {
		t.Errorf("topic %q made by a Declare with a cancelled context", kafkaName("cancelled-declare"))
	}
}

// Guarantee: each timeout is accepted from 0 (its default) to its Max
// constant; a negative one or one past the bound is an error naming the
// field and the rule.
func TestTimeoutsAreBounded(t *testing.T) {
	for _, f := range []struct {
		field string
		set   func(*Options[msg], time.Duration)
		max   time.Duration
	}{
		{"kafkatopology.connectTimeout", func(o *Options[msg], d time.Duration) { o.ConnectTimeout = d }, MaxConnectTimeout},
		{"kafkatopology.adminTimeout", func(o *Options[msg], d time.Duration) { o.AdminTimeout = d }, MaxAdminTimeout},
		{"kafkatopology.revokeTimeout", func(o *Options[msg], d time.Duration) { o.RevokeTimeout = d }, MaxAdminTimeout},
		{"kafkatopology.highWaterInterval", func(o *Options[msg], d time.Duration) { o.HighWaterInterval = d }, MaxHighWaterInterval},
	} {
		for _, ok := range []time.Duration{0, 10 * time.Millisecond, f.max} {
			o := connectOptions("127.0.0.1:9092")
			f.set(&o, ok)
			if err := o.WithDefaults().Validate(); err != nil {
				t.Errorf("%s %s refused: %v", f.field, ok, err)
			}
		}
		for _, c := range []struct {
			d    time.Duration
			rule string
		}{{-time.Millisecond, "gte"}, {f.max + time.Millisecond, "lte"}} {
			o := connectOptions("127.0.0.1:9092")
			f.set(&o, c.d)
			_, err := New(o)
			var es validate.Errors
			if !errors.As(err, &es) || !es.Has(f.field, c.rule) {
				t.Errorf("%s %s: New = %v, want a %s error on %s", f.field, c.d, err, c.rule, f.field)
			}
		}
	}
}

// Guarantee: a HighWaterInterval below MinHighWaterInterval is refused,
// naming the field and the rule, as the Kafka sources refuse theirs: each
// interval sends the cluster one ListOffsets request per broker.
func TestHighWaterIntervalBelowItsMinimumIsRefused(t *testing.T) {
	for _, d := range []time.Duration{MinHighWaterInterval, MinHighWaterInterval - 1} {
		o := connectOptions("127.0.0.1:9092")
		o.HighWaterInterval = d
		err := o.WithDefaults().Validate()
		var es validate.Errors
		if refused := errors.As(err, &es) && es.Has("kafkatopology.highWaterInterval", "gte"); refused != (d < MinHighWaterInterval) {
			t.Errorf("HighWaterInterval %s: Validate = %v", d, err)
		}
	}
}

// Guarantee: ConnectTimeout is the clients' dial timeout, unless Config
// sets a lower one, which is kept; the options print it.
func TestConnectTimeoutBoundsTheDialTimeout(t *testing.T) {
	o := connectOptions("127.0.0.1:9092")
	o.ConnectTimeout = 3 * time.Second
	if got := o.WithDefaults().saramaConfig().Net.DialTimeout; got != 3*time.Second {
		t.Errorf("Net.DialTimeout with sarama's defaults = %s, want ConnectTimeout 3s", got)
	}
	if got := connectOptions("127.0.0.1:9092").WithDefaults().saramaConfig().Net.DialTimeout; got != DefaultConnectTimeout {
		t.Errorf("Net.DialTimeout with ConnectTimeout unset = %s, want DefaultConnectTimeout %s", got, DefaultConnectTimeout)
	}
	o.Config = testbroker.SaramaConfig()
	o.Config.Net.DialTimeout = time.Second
	if got := o.WithDefaults().saramaConfig().Net.DialTimeout; got != time.Second {
		t.Errorf("Net.DialTimeout with Config's 1s and ConnectTimeout 3s = %s, want Config's 1s", got)
	}
	if s := fmt.Sprint(o.WithDefaults()); !strings.Contains(s, " ConnectTimeout:3s") {
		t.Errorf("the options print as %s, without ConnectTimeout:3s", s)
	}
}
