package pulsar_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/validate"
)

// newIdleClient returns a client that is never used to connect (the source
// only checks it is set); it is closed with the test.
func newIdleClient(t *testing.T) pulsar.Client {
	t.Helper()
	c, err := pulsar.NewClient(pulsar.ClientOptions{URL: "pulsar://127.0.0.1:1", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func fieldErrors(t *testing.T, err error) validate.Errors {
	t.Helper()
	var es validate.Errors
	if !errors.As(err, &es) {
		t.Fatalf("want validate.Errors, got %T %v", err, err)
	}
	if !errors.Is(err, validate.ErrInvalid) {
		t.Fatalf("validation error does not wrap validate.ErrInvalid: %v", err)
	}
	return es
}

// Every documented option rule is enforced by Validate, each naming its
// field and rule, all reported at once.
func TestValidateRules(t *testing.T) {
	client := newIdleClient(t)
	valid := func() bpulsar.Options {
		return bpulsar.Options{Client: client, Topics: []string{"a"}, Subscription: "s"}
	}
	if err := bpulsar.New(valid()).Validate(); err != nil {
		t.Fatalf("valid options rejected: %v", err)
	}
	cases := []struct {
		name   string
		mutate func(*bpulsar.Options)
		field  string
		rule   string
		text   string
	}{
		{"client required", func(o *bpulsar.Options) { o.Client = nil }, "pulsar.client", "required", "pulsar.client is required"},
		{"topics required", func(o *bpulsar.Options) { o.Topics = nil }, "pulsar.topics", "required", "pulsar.topics is required"},
		{"topics non-empty", func(o *bpulsar.Options) { o.Topics = []string{} }, "pulsar.topics", "", "pulsar.topics"},
		{"topic names non-empty", func(o *bpulsar.Options) { o.Topics = []string{"a", ""} }, "pulsar.topics[1]", "required", "pulsar.topics[1] is required"},
		{"topics unique", func(o *bpulsar.Options) { o.Topics = []string{"a", "a"} }, "pulsar.topics", "unique", "pulsar.topics must not repeat a value"},
		{"subscription required", func(o *bpulsar.Options) { o.Subscription = "" }, "pulsar.subscription", "required", "pulsar.subscription is required"},
		{"subscription type known", func(o *bpulsar.Options) { o.SubscriptionType = 9 }, "pulsar.subscriptionType", "lte", "pulsar.subscriptionType must be ≤ 3"},
		{"callback needs failover", func(o *bpulsar.Options) { o.ActiveStateCallback = func(bpulsar.ActiveState) {} }, "pulsar.activeStateCallback", "failover", "needs pulsar.subscriptionType Failover"},
		{"owned topic", func(o *bpulsar.Options) { o.Consumer.Topic = "x" }, "pulsar.consumer.topic", "owned", "use pulsar.topics"},
		{"owned topics", func(o *bpulsar.Options) { o.Consumer.Topics = []string{"x"} }, "pulsar.consumer.topics", "owned", "use pulsar.topics"},
		{"owned topics pattern", func(o *bpulsar.Options) { o.Consumer.TopicsPattern = "x.*" }, "pulsar.consumer.topicsPattern", "owned", "is set by the source"},
		{"owned subscription name", func(o *bpulsar.Options) { o.Consumer.SubscriptionName = "x" }, "pulsar.consumer.subscriptionName", "owned", "use pulsar.subscription"},
		{"owned type", func(o *bpulsar.Options) { o.Consumer.Type = pulsar.Shared }, "pulsar.consumer.type", "owned", "use pulsar.subscriptionType"},
		{"owned name", func(o *bpulsar.Options) { o.Consumer.Name = "x" }, "pulsar.consumer.name", "owned", "use pulsar.nameSuffix"},
		{"name suffix without spaces", func(o *bpulsar.Options) { o.NameSuffix = "host a" }, "pulsar.nameSuffix", "excludes", "pulsar.nameSuffix"},
		{"name suffix printable", func(o *bpulsar.Options) { o.NameSuffix = "host\n" }, "pulsar.nameSuffix", "printascii", "pulsar.nameSuffix"},
		{"name suffix short", func(o *bpulsar.Options) { o.NameSuffix = strings.Repeat("h", 65) }, "pulsar.nameSuffix", "max", "pulsar.nameSuffix"},
		{"owned event listener", func(o *bpulsar.Options) { o.Consumer.EventListener = nopListener{} }, "pulsar.consumer.eventListener", "owned", "use pulsar.activeStateCallback"},
		{"owned message channel", func(o *bpulsar.Options) { o.Consumer.MessageChannel = make(chan pulsar.ConsumerMessage) }, "pulsar.consumer.messageChannel", "owned", "is set by the source"},
		{"owned receiver queue", func(o *bpulsar.Options) { o.Consumer.ReceiverQueueSize = 10 }, "pulsar.consumer.receiverQueueSize", "owned", "derived from the producer flow window"},
		{"owned zero queue", func(o *bpulsar.Options) { o.Consumer.EnableZeroQueueConsumer = true }, "pulsar.consumer.enableZeroQueueConsumer", "owned", "is set by the source"},
		// pulsar-client-go ticks every third of the delay: below 3ns its
		// ticker panics, so anything under a millisecond is refused.
		{"nack delay negative", func(o *bpulsar.Options) { o.Consumer.NackRedeliveryDelay = -time.Second }, "pulsar.consumer.nackRedeliveryDelay", "gte", "at least 1ms"},
		{"nack delay of nanoseconds", func(o *bpulsar.Options) { o.Consumer.NackRedeliveryDelay = 2 }, "pulsar.consumer.nackRedeliveryDelay", "gte", "at least 1ms"},
		{"topic short name parts", func(o *bpulsar.Options) { o.Topics = []string{"a", "tenant/topic"} }, "pulsar.topics[1]", "topic", `"tenant/topic": a short name is`},
		{"topic domain", func(o *bpulsar.Options) { o.Topics = []string{"persistant://public/default/a"} }, "pulsar.topics[0]", "topic", "the domain must be persistent or non-persistent"},
		{"topic full name parts", func(o *bpulsar.Options) { o.Topics = []string{"persistent://public/a"} }, "pulsar.topics[0]", "topic", "a full name is"},
		{"topic partition number", func(o *bpulsar.Options) { o.Topics = []string{"a-partition-x"} }, "pulsar.topics[0]", "topic", "must end with a partition number"},
		{"dlq max deliveries above 0", func(o *bpulsar.Options) { o.Consumer.DLQ = &pulsar.DLQPolicy{DeadLetterTopic: "dlq"} }, "pulsar.consumer.dlq.maxDeliveries", "gt", "must be above 0 with a DLQ policy"},
		{"dlq topic required", func(o *bpulsar.Options) { o.Consumer.DLQ = &pulsar.DLQPolicy{MaxDeliveries: 3} }, "pulsar.consumer.dlq.deadLetterTopic", "required", "is required with a DLQ policy"},
		{"priority level not negative", func(o *bpulsar.Options) { o.Consumer.PriorityLevel = -1 }, "pulsar.consumer.priorityLevel", "range", "between 0 and 2147483647"},
		{"priority level at most MaxInt32", func(o *bpulsar.Options) { o.Consumer.PriorityLevel = math.MaxInt32 + 1 }, "pulsar.consumer.priorityLevel", "range", "between 0 and 2147483647"},
		{"max reconnect to broker not 0", func(o *bpulsar.Options) { var zero uint; o.Consumer.MaxReconnectToBroker = &zero }, "pulsar.consumer.maxReconnectToBroker", "gte", "nil (reconnect for ever, the client's default) or at least 1"},
		{"nack precision bit not negative", func(o *bpulsar.Options) { bit := int64(-1); o.Consumer.NackPrecisionBit = &bit }, "pulsar.consumer.nackPrecisionBit", "gte", "at least 0"},
		{"incomplete chunk expiry not negative", func(o *bpulsar.Options) { o.Consumer.ExpireTimeOfIncompleteChunk = -time.Second }, "pulsar.consumer.expireTimeOfIncompleteChunk", "gte", "0 (the client's default, 1 minute) or positive"},
		{"subscribe timeout not negative", func(o *bpulsar.Options) { o.SubscribeTimeout = -time.Second }, "pulsar.subscribeTimeout", "gte", "pulsar.subscribeTimeout"},
		{"subscribe timeout at most an hour", func(o *bpulsar.Options) { o.SubscribeTimeout = time.Hour + time.Second }, "pulsar.subscribeTimeout", "lte", "pulsar.subscribeTimeout"},
		{"owned auto queue", func(o *bpulsar.Options) { o.Consumer.EnableAutoScaledReceiverQueueSize = true }, "pulsar.consumer.enableAutoScaledReceiverQueueSize", "owned", "is set by the source"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := valid()
			tc.mutate(&o)
			err := bpulsar.New(o).Validate()
			if err == nil {
				t.Fatal("invalid options accepted")
			}
			es := fieldErrors(t, err)
			if !es.Has(tc.field, tc.rule) {
				t.Fatalf("want an error on %s (rule %q), got %v", tc.field, tc.rule, err)
			}
			if !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("error %q does not say %q", err, tc.text)
			}
		})
	}
}

// Options the source passes through (DLQ, nack delay, batch-index acks,
// initial position) are accepted, and a failover subscription may have a
// callback.
func TestValidateAcceptsPassThrough(t *testing.T) {
	o := bpulsar.Options{
		Client:              newIdleClient(t),
		Topics:              []string{"a", "b"},
		Subscription:        "s",
		SubscriptionType:    bpulsar.Failover,
		ActiveStateCallback: func(bpulsar.ActiveState) {},
		Consumer: pulsar.ConsumerOptions{
			SubscriptionInitialPosition:    pulsar.SubscriptionPositionEarliest,
			DLQ:                            &pulsar.DLQPolicy{MaxDeliveries: 3, DeadLetterTopic: "dlq"},
			NackRedeliveryDelay:            time.Millisecond,
			EnableBatchIndexAcknowledgment: true,
		},
	}
	if err := bpulsar.New(o).Validate(); err != nil {
		t.Fatalf("valid options rejected: %v", err)
	}
}

// Several broken rules are reported together, not one at a time.
func TestValidateReportsAll(t *testing.T) {
	err := bpulsar.New(bpulsar.Options{Consumer: pulsar.ConsumerOptions{ReceiverQueueSize: 5}}).Validate()
	es := fieldErrors(t, err)
	for _, f := range []string{"pulsar.client", "pulsar.topics", "pulsar.subscription", "pulsar.consumer.receiverQueueSize"} {
		if !es.Has(f, "") {
			t.Errorf("missing error for %s in %v", f, err)
		}
	}
}

// The subscription types print their Pulsar names.
func TestSubscriptionTypeString(t *testing.T) {
	want := map[bpulsar.SubscriptionType]string{bpulsar.Shared: "shared", bpulsar.Exclusive: "exclusive", bpulsar.Failover: "failover", bpulsar.KeyShared: "key_shared", 7: "SubscriptionType(7)"}
	for st, s := range want {
		if st.String() != s {
			t.Errorf("%d prints %q, want %q", st, st.String(), s)
		}
	}
	var zero bpulsar.SubscriptionType
	if zero != bpulsar.Shared {
		t.Error("the zero subscription type is not Shared")
	}
}

type nopListener struct{}

func (nopListener) BecameActive(pulsar.Consumer, string, int32)   {}
func (nopListener) BecameInactive(pulsar.Consumer, string, int32) {}

// pipeline.New reports the source's option errors beside its own, before
// any stage starts.
func TestPipelineNewReportsSourceErrors(t *testing.T) {
	src := bpulsar.New(bpulsar.Options{Client: newIdleClient(t), Topics: []string{"a"}})
	_, err := pipeline.New(pipeline.Options[[]byte, []byte]{
		Name:       "p",
		Producer:   producer.Options[[]byte]{Source: src, Flow: producer.Flow{Initial: 10, Threshold: 10}},
		Processors: processor.Options[[]byte, []byte]{Handle: func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) { return m.Data, nil }},
	})
	es := fieldErrors(t, err)
	if !es.Has("pulsar.subscription", "required") || !es.Has("producer.flow.threshold", "ltfield") {
		t.Fatalf("want the source's and the flow's errors together, got %v", err)
	}
}

// A source started outside a pipeline validates its options and the stage's
// flow window when Run starts, and fails without subscribing.
func TestRunValidatesOutsidePipeline(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  bpulsar.Options
		flow  producer.Flow
		field string
	}{
		{"options", bpulsar.Options{Topics: []string{"a"}, Subscription: "s"}, producer.Flow{Initial: 10, Threshold: 5, Refill: 5}, "pulsar.client"},
		{"flow", bpulsar.Options{Client: newIdleClient(t), Topics: []string{"a"}, Subscription: "s"}, producer.Flow{Initial: 10, Threshold: 12, Refill: 5}, "producer.flow.threshold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := bpulsar.New(tc.opts)
			p := newProducerRuntime(producer.Options[[]byte]{Source: src, Concurrency: 1, Flow: tc.flow,
				Restart: producer.Restart{MaxRestarts: 1, Window: time.Minute, Backoff: time.Millisecond, MaxBackoff: time.Millisecond}},
				"outside", nil, discardOutput{})
			errs := make(chan error, 1)
			var wg sync.WaitGroup
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			p.Start(ctx, &wg, func(err error) { errs <- err })
			err := <-errs
			p.StopFetching()
			cancel()
			wg.Wait()
			if err := p.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			es := fieldErrors(t, err)
			if !es.Has(tc.field, "") {
				t.Fatalf("want an error on %s, got %v", tc.field, err)
			}
			if src.Stats().Consumers != 0 {
				t.Fatal("a consumer was created with invalid options")
			}
		})
	}
}

type discardOutput struct{}

func (discardOutput) Publish(_ context.Context, msgs []*message.Message[[]byte]) (int, error) {
	return len(msgs), nil
}

// Guarantee: Validate refuses a topic name exactly when pulsar-client-go
// does (every subscribe would fail on it), so that a misspelt topic fails
// pipeline.New, naming the topic, instead of every stage at every restart.
func TestValidateTopicNamesAsTheClientParsesThem(t *testing.T) {
	e := newEnv(t)
	// pulsar-client-go parses these, and a broker decides: pulsartest
	// refuses a legacy name with a cluster and a local name with a "/".
	for _, name := range []string{"tenant/cluster/ns/a", "persistent://tenant/cluster/ns/a", "persistent://tenant/ns/a/b"} {
		if err := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{name}, Subscription: "s"}).Validate(); err != nil {
			t.Errorf("topic %q, which the client parses, refused: %v", name, err)
		}
	}
	for _, name := range []string{
		"a", "tenant/ns/a", "persistent://tenant/ns/a", "non-persistent://tenant/ns/a", "a-partition-3", "tenant/ns/a-partition-0",
		"tenant/a", "a/b/c/d/e", "/a", "persistant://tenant/ns/a", "http://tenant/ns/a", "persistent://tenant/a",
		"persistent://a", "a-partition-x", "a-partition-", "a-partition-3-b",
	} {
		_, clientErr := e.client.TopicPartitions(name)
		verr := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{name}, Subscription: "s"}).Validate()
		refused := verr != nil && fieldErrors(t, verr).Has("pulsar.topics[0]", "topic")
		if refused != (clientErr != nil) {
			t.Errorf("topic %q: Validate refuses it: %t (%v); the client: %v", name, refused, verr, clientErr)
		}
	}
}

// Guarantee: the defaults docs/pulsar.md gives are the ones in force: a
// zero SubscribeTimeout is 90s, and ClientDefaults gives a client a 5s
// connection timeout, a 7s operation timeout and a 7s keep-alive, so
// that about ConnectionTimeout + 2 × OperationTimeout (19s) stays below
// the subscribe timeout.
func TestDefaultsAreTheDocumentedOnes(t *testing.T) {
	d := bpulsar.ClientDefaults(pulsar.ClientOptions{URL: "pulsar://x:6650"}, nil)
	for _, c := range []struct {
		field     string
		got, want time.Duration
	}{
		{"SubscribeTimeout", bpulsar.Options{}.WithDefaults().SubscribeTimeout, 90 * time.Second},
		{"ClientOptions.ConnectionTimeout", d.ConnectionTimeout, 5 * time.Second},
		{"ClientOptions.OperationTimeout", d.OperationTimeout, 7 * time.Second},
		{"ClientOptions.KeepAliveInterval", d.KeepAliveInterval, 7 * time.Second},
	} {
		if c.got != c.want {
			t.Errorf("default %s = %s, want %s", c.field, c.got, c.want)
		}
	}
	if set := (bpulsar.Options{SubscribeTimeout: time.Minute}).WithDefaults().SubscribeTimeout; set != time.Minute {
		t.Errorf("WithDefaults made the SubscribeTimeout set, 1m, %s", set)
	}
}
