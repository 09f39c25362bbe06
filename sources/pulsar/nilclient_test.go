package pulsar_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
)

// TestANilClientIsAnOptionErrorNotAPanic checks that a nil *Client (what
// a failed NewClient returns) given as Options.Client makes New return a
// source whose Validate reports the missing client, and that the
// Client's own methods answer on a nil one.
func TestANilClientIsAnOptionErrorNotAPanic(t *testing.T) {
	var c *bpulsar.Client
	s := bpulsar.New(bpulsar.Options{Client: c, Topics: []string{"t"}, Subscription: "s"})
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "pulsar.client is required") {
		t.Errorf("Validate = %v, want the option errors naming the client", err)
	}
	if got := c.ServiceURL(); got != "" {
		t.Errorf("ServiceURL = %q, want empty", got)
	}
	if got := c.String(); got != "pulsar client (nil)" {
		t.Errorf("String = %q", got)
	}
	err := errors.New("dial pulsar://user:secret@host:6650")
	if got := c.Redact(err); !errors.Is(got, err) || got.Error() == err.Error() {
		t.Errorf("Redact = %q, want the URL's user information redacted", got)
	}
}

// TestNewWithAClientNewClientDidNotMakeDoesNotPanic checks that New given
// a zero *Client (one NewClient did not make) returns a source instead of
// panicking: such a client has no reconnect counts to register the
// subscription with.
func TestNewWithAClientNewClientDidNotMakeDoesNotPanic(t *testing.T) {
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("New with a zero Client panicked: %v", r)
		}
	}()
	if s := bpulsar.New(bpulsar.Options{Client: &bpulsar.Client{}, Topics: []string{"t"}, Subscription: "s"}); s == nil {
		t.Fatal("New with a zero Client returned nil")
	}
}

// TestAZeroClientRefusesEveryCallWithErrClientNotCreated checks that a
// zero *Client (declared, not made by NewClient) answers each call that
// would reach the broker with ErrClientNotCreated, and that its Close
// does nothing, instead of panicking on its missing pulsar-client-go
// client.
func TestAZeroClientRefusesEveryCallWithErrClientNotCreated(t *testing.T) {
	var c bpulsar.Client
	calls := map[string]func() error{
		"CreateProducer": func() error { _, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "t"}); return err },
		"Subscribe": func() error {
			_, err := c.Subscribe(pulsar.ConsumerOptions{Topic: "t", SubscriptionName: "s"})
			return err
		},
		"CreateReader":    func() error { _, err := c.CreateReader(pulsar.ReaderOptions{Topic: "t"}); return err },
		"CreateTableView": func() error { _, err := c.CreateTableView(pulsar.TableViewOptions{Topic: "t"}); return err },
		"TopicPartitions": func() error { _, err := c.TopicPartitions("t"); return err },
		"NewTransaction":  func() error { _, err := c.NewTransaction(time.Second); return err },
		"Close":           func() error { c.Close(); return bpulsar.ErrClientNotCreated },
	}
	for name, call := range calls {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s on a zero Client panicked: %v", name, r)
				}
			}()
			if err := call(); !errors.Is(err, bpulsar.ErrClientNotCreated) {
				t.Errorf("%s on a zero Client = %v, want ErrClientNotCreated", name, err)
			}
		}()
	}
}
