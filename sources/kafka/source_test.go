package kafka_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/sources/kafka/franz"
	"github.com/boulevard-go/boulevard/validate"
)

// Guarantee: in a normal run with several group members, every record is
// handled exactly once and the group commits every partition to its end.
func TestEveryRecordOnceSeveralMembers(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const parts = 6
		c := newCluster(t, parts)
		n := records(3000)
		ends := produce(t, c, parts, 0, n)
		l := newLedger()
		watch := watchCommits(c, "g-normal", l)
		src := cl.new(t, sourceOptions(c, "g-normal"))
		p := startPipeline(t, pipelineOpts("normal", src, 3, l, nil))
		wait.Within(t, loadWait(30*time.Second, 3000), "every record handled", func() bool { return l.covers(ends) })
		wait.Within(t, 10*time.Second, "commits at the end offsets", func() bool { return equalOffsets(committed(c, "g-normal"), ends) })
		stopPipeline(t, p)
		if d := l.duplicates(); d != 0 {
			t.Fatalf("%d records handled twice in a run without failures", d)
		}
		if got := committed(c, "g-normal"); !equalOffsets(got, ends) {
			t.Fatalf("committed %v after stop, want %v", got, ends)
		}
		watch.check(t)
	})
}

// Guarantee: invalid options are rejected by New, naming the field and the
// rule, before anything connects.
func TestOptionsValidated(t *testing.T) {
	_, err := kafka.New(kafka.Options{InitialOffset: "middle", FailurePolicy: "retry-forever", Brokers: []string{"no-port"}})
	if err == nil {
		t.Fatal("New accepted invalid options")
	}
	if !errors.Is(err, validate.ErrInvalid) {
		t.Fatalf("error %v does not wrap validate.ErrInvalid", err)
	}
	var es validate.Errors
	if !errors.As(err, &es) {
		t.Fatalf("error %T is not validate.Errors", err)
	}
	for _, want := range []struct{ field, rule string }{
		{"kafka.groupID", "required"},
		{"kafka.topics", "required"},
		{"kafka.initialOffset", "oneof"},
		{"kafka.failurePolicy", "oneof"},
		{"kafka.brokers[0]", "hostname_port"},
	} {
		if !es.Has(want.field, want.rule) {
			t.Errorf("no %s/%s error in %v", want.field, want.rule, err)
		}
	}
	// A revoke timeout that does not fit in sarama's rebalance timeout.
	cfg := testConfig()
	_, err = kafka.New(kafka.Options{Brokers: []string{"127.0.0.1:9092"}, GroupID: "g", Topics: []string{"t"},
		RevokeTimeout: time.Minute, Config: cfg})
	if err == nil || !errors.As(err, &es) || !es.Has("kafka.revokeTimeout", "ltfield") {
		t.Fatalf("revoke timeout above the rebalance timeout not rejected: %v", err)
	}
	// Something sarama itself rejects.
	cfg = testConfig()
	cfg.Consumer.Fetch.Default = 0
	_, err = kafka.New(kafka.Options{Brokers: []string{"127.0.0.1:9092"}, GroupID: "g", Topics: []string{"t"}, Config: cfg})
	if err == nil || !errors.As(err, &es) || !es.Has("kafka.config", "sarama") {
		t.Fatalf("sarama config error not reported: %v", err)
	}
}

// Guarantee: a closed source refuses to run again.
func TestRunAfterClose(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		opts := kafka.Options{Brokers: []string{"127.0.0.1:1"}, GroupID: "g", Topics: []string{"t"}, Config: testConfig(),
			RevokeTimeout: time.Second}
		src := cl.new(t, opts)
		if err := src.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := src.Run(context.Background(), nil); !errors.Is(err, kafka.ErrClosed) {
			t.Fatalf("Run after Close = %v, want ErrClosed", err)
		}
	})
}

// Guarantee: a pipeline that leaves the permit window unset gets the
// window of the source's Info, so that sarama's channel keeps its own default
// size; a window set in the options wins.
func TestDefaultWindow(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		c := newCluster(t, 1)
		src := cl.new(t, sourceOptions(c, "g-window"))
		if info, err := src.Info(); err != nil || info.Window != kafka.DefaultWindow || !info.Ordered {
			t.Fatalf("Info() = %+v, %v, want an ordered source with window %d", info, err, kafka.DefaultWindow)
		}
		for _, tc := range []struct {
			flow producer.Flow
			want int
		}{{producer.Flow{}, kafka.DefaultWindow}, {producer.Flow{Initial: 30}, 30}} {
			o := pipelineOpts("window", src, 1, newLedger(), nil)
			o.Producer.Flow = tc.flow
			p, err := pipeline.New(o)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Topology().Producer.Flow.Initial; got != tc.want {
				t.Fatalf("window %d with Flow %+v, want %d", got, tc.flow, tc.want)
			}
		}
	})
}

// Guarantee: a source New did not make (a zero Source or a nil *Source),
// of either client, never panics and never tries to connect: Run, Info and
// Validate return ErrNotCreated at once (so the pipeline reports that
// rather than a connection failure or a list of empty options), Stats has
// no member, Close returns nil, and the source prints.
func TestSourceNotMadeByNewReportsErrNotCreated(t *testing.T) {
	var nilSarama *kafka.Source
	var nilFranz *franz.Source
	for _, tc := range []struct {
		name string
		src  interface {
			testSource
			Validate() error
			String() string
		}
	}{{"sarama/zero", &kafka.Source{}}, {"sarama/nil", nilSarama}, {"franz/zero", &franz.Source{}}, {"franz/nil", nilFranz}} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.src
			if err := s.Run(context.Background(), nil); !errors.Is(err, kafka.ErrNotCreated) || !errors.Is(err, franz.ErrNotCreated) {
				t.Errorf("Run = %v, want ErrNotCreated", err)
			}
			if _, err := s.Info(); !errors.Is(err, kafka.ErrNotCreated) {
				t.Errorf("Info = %v, want ErrNotCreated", err)
			}
			if err := s.Validate(); !errors.Is(err, kafka.ErrNotCreated) {
				t.Errorf("Validate = %v, want ErrNotCreated", err)
			}
			if st := s.Stats(); len(st.Members) != 0 {
				t.Errorf("Stats = %+v, want no member", st)
			}
			if err := s.Close(context.Background()); err != nil {
				t.Errorf("Close = %v, want nil", err)
			}
			if s.String() == "" {
				t.Error("String is empty")
			}
		})
	}
}
