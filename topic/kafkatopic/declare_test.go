package kafkatopic_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/testnet"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
	"github.com/boulevard-go/boulevard/validate"
)

// partitionsOf reads a Kafka topic's partition count from the cluster.
func partitionsOf(t *testing.T, brokers []string, kname string) int {
	t.Helper()
	admin, err := sarama.NewClusterAdmin(brokers, testbroker.SaramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	md, err := admin.DescribeTopics([]string{kname})
	if err != nil || len(md) != 1 || !errors.Is(md[0].Err, sarama.ErrNoError) {
		t.Fatalf("DescribeTopics(%s) = %v, %v", kname, md, err)
	}
	return len(md[0].Partitions)
}

// Declaring a topic creates it with the configured partitions, and
// declaring it again (from this or another backend) is not an error.
func TestDeclarationIsIdempotent(t *testing.T) {
	c := testbroker.Kafka(t)
	o := testOptions[int](c, topic.IntCodec{})
	o.Partitions = 3
	b := newBackend(t, o)
	h := newTopic(t, b, "orders/eu", topic.Options{})
	if got := partitionsOf(t, c.ListenAddrs(), "orders.eu"); got != 3 {
		t.Fatalf("created with %d partitions, want 3", got)
	}
	h.Close()
	newTopic(t, b, "orders/eu", topic.Options{})
	newTopic(t, newBackend(t, o), "orders/eu", topic.Options{Mode: topic.Mixed})
	// A topic with more partitions than configured is fine.
	o.Partitions = 2
	newTopic(t, newBackend(t, o), "orders/eu", topic.Options{})
	if got := partitionsOf(t, c.ListenAddrs(), "orders.eu"); got != 3 {
		t.Fatalf("partitions changed to %d", got)
	}
}

// An existing topic with fewer partitions than configured is refused
// with an error naming the topic and both counts.
func TestDeclarationRefusesFewerPartitions(t *testing.T) {
	c := testbroker.Kafka(t)
	o := testOptions[int](c, topic.IntCodec{})
	o.Partitions = 2
	newTopic(t, newBackend(t, o), "events", topic.Options{})
	o.Partitions = 5
	_, err := topic.NewTopic("events", topic.Options{}, topic.Backend[int](newBackend(t, o)))
	var pe *kafkatopic.PartitionsError
	if !errors.As(err, &pe) || pe.Have != 2 || pe.Want != 5 || pe.Topic != "events" {
		t.Fatalf("error %v, want a PartitionsError with 2 and 5", err)
	}
	if !errors.Is(err, kafkatopic.ErrPartitions) {
		t.Fatalf("error %v does not wrap ErrPartitions", err)
	}
	for _, want := range []string{`"events"`, "2 partition", "5 configured"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not mention %s", err, want)
		}
	}
}

// Settings a Kafka topic cannot honour are refused when the topic is
// declared, naming the topic, the setting and the backend; tracked
// publishers are refused.
func TestCapabilityRefusals(t *testing.T) {
	c := testbroker.Kafka(t)
	b := newBackend(t, testOptions[int](c, topic.IntCodec{}))
	for _, tc := range []struct {
		o    topic.Options
		what string
	}{
		{topic.Options{AckPropagation: topic.AckPropagation{Mode: topic.PropagationAuto}}, "ack_propagation.mode"},
		{topic.Options{Mode: topic.BroadcastOnly, Broadcast: topic.BroadcastPolicy{AckMode: topic.AckAll, OnLag: topic.Disconnect},
			AckPropagation: topic.AckPropagation{Mode: topic.PropagationAuto}}, "broadcast.ack_mode"},
	} {
		_, err := topic.NewTopic("refused", tc.o, topic.Backend[int](b))
		var ue *topic.UnsupportedError
		if !errors.As(err, &ue) || ue.What != tc.what || ue.Backend != "kafka" || !errors.Is(err, topic.ErrUnsupportedPolicy) {
			t.Fatalf("options %+v: error %v, want unsupported %s", tc.o, err, tc.what)
		}
		if !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), `"kafka"`) {
			t.Fatalf("error %q does not name the topic and the backend", err)
		}
	}
	h := newTopic(t, b, "plain", topic.Options{})
	if _, err := h.Tracked(topic.TrackedOptions{}); !errors.Is(err, topic.ErrUnsupportedPolicy) {
		t.Fatalf("Tracked = %v, want ErrUnsupportedPolicy", err)
	}
}

// Invalid options are an error naming each field and its rule, before
// anything connects.
func TestOptionsValidation(t *testing.T) {
	bad := sarama.NewConfig()
	bad.Producer.Flush.MaxMessages = -1
	_, err := kafkatopic.New(kafkatopic.Options[int]{Acks: "most", Partitions: -1, Config: bad, PublishBuffer: -2, InitialOffset: "oldest"})
	var ve validate.Errors
	if !errors.As(err, &ve) {
		t.Fatalf("New = %v, want validate.Errors", err)
	}
	for _, f := range []struct{ field, rule string }{
		{"brokers", "required"}, {"codec", "required"}, {"acks", "oneof"}, {"partitions", "gte"},
		{"publish_buffer", "gte"}, {"initial_offset", "oneof"}, {"config", "valid"},
	} {
		if !ve.Has(f.field, f.rule) {
			t.Errorf("%v: no %s %s error", err, f.field, f.rule)
		}
	}
	_, err = kafkatopic.New(kafkatopic.Options[int]{Brokers: []string{"no port"}, Codec: topic.IntCodec{}})
	if !errors.As(err, &ve) || !ve.Has("brokers[0]", "hostname_port") {
		t.Fatalf("New with a bad broker address = %v", err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Fatalf("error %q spans lines", err)
	}
}

// Guarantee: a cluster that cannot be reached (a broker that never
// answers, nothing listening, or something other than a broker answering)
// is an ErrConnect error from New, bounded by ConnectTimeout, naming the
// broker and the cause.
func TestUnreachableClusterFailsNewNamingTheBrokerAndTheCause(t *testing.T) {
	for _, tc := range testbroker.UnreachableKafka {
		t.Run(tc.Name, func(t *testing.T) {
			o := testOptions[int](nil, topic.IntCodec{})
			o.Brokers = []string{tc.Addr(t)}
			o.ConnectTimeout = 200 * time.Millisecond
			o.Config.Metadata.Retry.Max = 0
			start := time.Now()
			b, err := kafkatopic.New(o)
			if err == nil {
				_ = b.Close(context.Background())
			}
			if !errors.Is(err, kafkatopic.ErrConnect) {
				t.Fatalf("New = %v, want ErrConnect", err)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Fatalf("New took %s", d)
			}
			for _, want := range []string{o.Brokers[0], tc.Cause} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("New's error %q does not name %s", err, want)
				}
			}
		})
	}
}

// Guarantee: NewContext against a cluster that accepts connections and
// never answers returns by ctx's deadline, far below ConnectTimeout, with
// an error wrapping both ErrConnect and context.DeadlineExceeded.
func TestNewContextReturnsByItsDeadlineWhenTheClusterHangs(t *testing.T) {
	o := testOptions[int](nil, topic.IntCodec{})
	o.Brokers = []string{testnet.SilentListener(t)}
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
	o := testOptions[int](c, topic.IntCodec{})
	o.ConnectTimeout = time.Minute
	newContextReturnsByDeadline(t, o)
}

// newContextReturnsByDeadline checks that NewContext with o returns by its
// context's deadline with an error wrapping ErrConnect and
// context.DeadlineExceeded.
func newContextReturnsByDeadline(t *testing.T, o kafkatopic.Options[int]) {
	t.Helper()
	testbroker.ReturnsByDeadline(t, "NewContext", func(ctx context.Context) error {
		b, err := kafkatopic.NewContext(ctx, o)
		if err == nil {
			_ = b.Close(context.Background())
		} else if !errors.Is(err, kafkatopic.ErrConnect) {
			t.Errorf("NewContext = %v, want an error wrapping ErrConnect", err)
		}
		return err
	})
}

// Guarantee: the declaration's context bounds it: with the cluster hung,
// CreateTopicsContext and NewTopicContext return by its deadline, long
// before Options.AdminTimeout and sarama's read timeouts, an error
// wrapping ErrAdmin and the context's error.
func TestDeclarationReturnsByItsDeadlineWhenTheClusterHangs(t *testing.T) {
	for name, declare := range map[string]func(context.Context, topic.Backend[int]) error{
		"CreateTopicsContext": func(ctx context.Context, b topic.Backend[int]) error {
			_, err := topic.NewBroker[int]().CreateTopicsContext(ctx, []topic.Declaration[int]{{Name: "hung", Backend: b}})
			return err
		},
		"NewTopicContext": func(ctx context.Context, b topic.Backend[int]) error {
			_, err := topic.NewTopicContext(ctx, "hung", topic.Options{}, b)
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := testbroker.Kafka(t)
			b := newBackend(t, testOptions[int](c, topic.IntCodec{}))
			testbroker.HangKafka(t, c)
			testbroker.ReturnsByDeadline(t, name, func(ctx context.Context) error {
				err := declare(ctx, b)
				if !errors.Is(err, kafkatopic.ErrAdmin) {
					t.Errorf("%s with the cluster hung = %v, want an error wrapping ErrAdmin", name, err)
				}
				return err
			})
		})
	}
}
