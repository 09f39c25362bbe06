package pulsartopic_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/redact/redacttest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/testnet"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/pulsartopic"
)

// Guarantee: declaring a topic that already exists with the same partition
// count succeeds and uses it, from the same backend or another one (as a
// second process would): the partitioned topic is created once, a topic
// of a single partition as one of several.
func TestDeclareIdempotent(t *testing.T) {
	for _, partitions := range []int{1, 3} {
		t.Run(fmt.Sprint(partitions), func(t *testing.T) {
			b := testbroker.Pulsar(t)
			var creates atomic.Int32
			opts := testOptions[int](b, topic.IntCodec{})
			opts.Partitions = partitions
			opts.Admin = pulsartopic.AdminFunc(func(_ context.Context, name string, n int) error {
				creates.Add(1)
				return b.CreateTopic(name, n)
			})
			first, second := newBackend(t, opts), newBackend(t, opts)
			for i, be := range []*pulsartopic.Backend[int]{first, first, second} {
				h, err := topic.NewTopic[int]("orders", topic.Options{}, be)
				if err != nil {
					t.Fatalf("declaration %d: %v", i, err)
				}
				if err := h.Publish(ctxT(t), i); err != nil {
					t.Fatalf("Publish after declaration %d: %v", i, err)
				}
				h.Close()
			}
			if n := creates.Load(); n != 1 {
				t.Fatalf("Admin created the topic %d times, want once", n)
			}
			if got := len(b.Messages(first.TopicName("orders"))); got != 3 {
				t.Fatalf("%d messages stored on the topic, want 3", got)
			}
		})
	}
}

// Guarantee: a topic that exists with another partition count is an error
// naming both counts (partitioned or not), and nothing is published to it.
func TestDeclarePartitionMismatch(t *testing.T) {
	b := testbroker.Pulsar(t)
	for _, c := range []struct{ have, want int }{{2, 3}, {2, 0}} {
		opts := testOptions[int](b, topic.IntCodec{})
		opts.Partitions = c.want
		be := newBackend(t, opts)
		name := topic.Name("p" + string(rune('a'+c.want)))
		if err := b.CreateTopic(be.TopicName(name), c.have); err != nil {
			t.Fatal(err)
		}
		_, err := topic.NewTopic[int](name, topic.Options{}, be)
		var pe *pulsartopic.PartitionError
		if !errors.As(err, &pe) || !errors.Is(err, pulsartopic.ErrPartitionMismatch) || pe.Have != c.have || pe.Want != c.want {
			t.Fatalf("have %d, want %d: NewTopic error %v, want a PartitionError with both counts", c.have, c.want, err)
		}
		for _, n := range []string{"has 2 partitions", "ask for " + string(rune('0'+c.want))} {
			if !strings.Contains(err.Error(), n) {
				t.Fatalf("error %q does not say %q", err, n)
			}
		}
	}
}

// Guarantee: a partitioned topic that does not exist, with no Admin to
// create it, is refused with ErrNoAdmin (not created non-partitioned).
func TestDeclareWithoutAdmin(t *testing.T) {
	b := testbroker.Pulsar(t)
	opts := testOptions[int](b, topic.IntCodec{})
	opts.Partitions, opts.Admin = 2, nil
	be := newBackend(t, opts)
	if _, err := topic.NewTopic[int]("orders", topic.Options{}, be); !errors.Is(err, pulsartopic.ErrNoAdmin) {
		t.Fatalf("NewTopic = %v, want ErrNoAdmin", err)
	}
	if ms := b.Messages(be.TopicName("orders")); ms != nil {
		t.Fatalf("the topic was written: %v", ms)
	}
}

// Guarantee: the context given to the declaration bounds it: against a
// broker that never answers, CreateTopicsContext returns the context's
// error when it ends, long before the client's own timeouts.
func TestDeclareHonoursContext(t *testing.T) {
	addr := testnet.SilentListener(t)
	o := pulsartopic.Options[int]{ServiceURL: "pulsar://" + addr, Codec: topic.IntCodec{}, Logger: testbroker.PulsarLogger()}
	// The abandoned lookup ends by then (the handshake waits one keep-alive
	// interval), so the backend's Close does not wait long for it.
	o.ClientOptions.OperationTimeout = time.Second
	o.ClientOptions.KeepAliveInterval = time.Second
	be := newBackend(t, o)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := topic.NewBroker[int]().CreateTopicsContext(ctx, []topic.Declaration[int]{{Name: "orders", Backend: be}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("CreateTopicsContext = %v, want the context's deadline", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("declaration took %v after its context ended", d)
	}
}

// Guarantee: a declaration against a broker address where nothing listens
// fails by the client's operation timeout, and sooner by its context's
// deadline, with an *Error naming the topic and wrapping ErrConnect, which
// names the broker's address and the refusal; a WARN line names them too;
// neither the user information of the service URL nor the token shows in
// the errors or the log.
func TestDeclarationWhereNothingListensFailsByItsBoundsWarningOfTheRefusal(t *testing.T) {
	var lines logtest.Lines
	addr := testnet.ClosedPort(t)
	o := pulsartopic.Options[int]{ServiceURL: "pulsar://user:" + password + "@" + addr, Codec: topic.IntCodec{},
		Logger: slog.New(slog.NewTextHandler(&lines, nil)), AdminTimeout: 2 * time.Second}
	o.ClientOptions.Authentication = pulsar.NewAuthenticationToken(token)
	be := newBackend(t, o)
	namesTheBroker := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, pulsartopic.ErrConnect) {
			t.Errorf("%s = %v, want an error wrapping ErrConnect", what, err)
		}
		for _, want := range []string{"broker pulsar://" + addr, "connection refused"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s = %v, want it to name %q", what, err, want)
			}
		}
		redacttest.NoSecret(t, "the declaration's error", err, "user")
	}
	start := time.Now()
	_, err := topic.NewTopic[int]("orders", topic.Options{}, be)
	var perr *pulsartopic.Error
	if !errors.As(err, &perr) || !strings.Contains(err.Error(), "orders") {
		t.Fatalf("NewTopic = %v, want a *pulsartopic.Error naming the topic", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("NewTopic took %v with an admin timeout of 2s", d)
	}
	redacttest.NoSecret(t, "the declaration's error", err, password, token)
	namesTheBroker("NewTopic", err)

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = topic.NewBroker[int]().CreateTopicsContext(ctx, []topic.Declaration[int]{{Name: "invoices", Backend: be}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("CreateTopicsContext = %v, want the context's deadline", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("CreateTopicsContext took %v with a deadline of 200ms", d)
	}
	redacttest.NoSecret(t, "the declaration's error", err, password, token)
	namesTheBroker("CreateTopicsContext", err)

	if lines.Count("level=WARN", addr, "connection refused") == 0 {
		t.Errorf("no WARN line names %s and the refusal:\n%s", addr, strings.Join(lines.All(), ""))
	}
	for _, l := range lines.All() {
		redacttest.NoSecret(t, "a log line", l, password, token)
	}
}

// Guarantee: a topic name with "/" maps to one Pulsar topic (its "/"
// written "~"), distinct from every other valid name.
func TestTopicNameMapping(t *testing.T) {
	b := testbroker.Pulsar(t)
	be := newBackend(t, testOptions[int](b, topic.IntCodec{}))
	if got, want := be.TopicName("edge/raw"), "persistent://public/default/edge~raw"; got != want {
		t.Fatalf("TopicName(edge/raw) = %q, want %q", got, want)
	}
	if be.TopicName("edge/raw") == be.TopicName("edge.raw") || be.TopicName("edge/raw") == be.TopicName("edge_raw") {
		t.Fatal("two topic names map to one Pulsar topic")
	}
	h, err := topic.NewTopic[int]("edge/raw", topic.Options{}, be)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.Publish(ctxT(t), 1); err != nil {
		t.Fatal(err)
	}
	if n := len(b.Messages(pulsartest.FullTopicName("edge~raw"))); n != 1 {
		t.Fatalf("%d messages on edge~raw, want 1", n)
	}
}

// Guarantee: the declaration's context bounds the creation of the topic's
// producer too: while the broker leaves it unanswered, the declaration
// returns the context's error by its deadline, long before the client's
// operation timeout; the producer created late is closed, so the backend's
// Close leaves none open.
func TestDeclarationReturnsByItsDeadlineWhileTheProducerIsWithheld(t *testing.T) {
	b := testbroker.Pulsar(t)
	be := patientBackend(t, b)
	release := b.Withhold(pulsartest.CommandProducer)
	t.Cleanup(release)
	if !testbroker.ReturnsByDeadline(t, "CreateTopicsContext", func(ctx context.Context) error {
		_, err := topic.NewBroker[int]().CreateTopicsContext(ctx, []topic.Declaration[int]{{Name: "held", Backend: be}})
		return err
	}) {
		t.FailNow()
	}
	release()
	if err := be.Close(ctxT(t)); err != nil {
		t.Fatalf("Close once the broker answered = %v, want nil", err)
	}
	if st := b.Stats(); st.ProducersOpen != 0 {
		t.Errorf("after Close: %d producers open, want none", st.ProducersOpen)
	}
}

// Guarantee: a partitioned topic another process creates while this one
// declares it is used as it is: when Admin fails because the topic now
// exists with the wanted partition count, the declaration succeeds.
func TestDeclareSucceedsWhenAnotherProcessCreatedTheTopicMeanwhile(t *testing.T) {
	b := testbroker.Pulsar(t)
	opts := testOptions[int](b, topic.IntCodec{})
	opts.Partitions = 2
	opts.Admin = pulsartopic.AdminFunc(func(_ context.Context, name string, n int) error {
		if err := b.CreateTopic(name, n); err != nil { // the other process
			return err
		}
		return errors.New("409 Conflict: this topic already exists")
	})
	be := newBackend(t, opts)
	h, err := topic.NewTopic[int]("orders", topic.Options{}, be)
	if err != nil {
		t.Fatalf("NewTopic after another process created the topic = %v, want nil", err)
	}
	defer h.Close()
	if err := h.Publish(ctxT(t), 1); err != nil {
		t.Fatal(err)
	}
}
