package franz

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/boulevard-go/boulevard/internal/kafkareach"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// Guarantee: a member whose stage is degraded while it still holds its
// group session runs again once its client reads answers from the
// cluster, with no record and no new session to say so: on an idle topic
// the session's fetches and heartbeats, which the member hears through
// the hook it adds to its client (heardHook), are the only sign that it
// reads. The stage is degraded here through the member's rule itself, as
// a run of failed heartbeats under the consumer group protocol does,
// after the member read the topic's one record.
func TestDegradedMemberHoldingItsSessionRunsAgainOnTheAnswersItsClientReads(t *testing.T) {
	const topic, group = "events", "g-heard"
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	pcl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	err = pcl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Value: []byte("one")}).FirstErr()
	pcl.Close()
	if err != nil {
		t.Fatal(err)
	}

	members := committingMember(t) // the member's first commit hands it over
	src := groupSource(t, c, topic, group, func(o *Options) {
		o.CommitMode = CommitOnAck
		o.ClientOptions = []kgo.Opt{
			kgo.SessionTimeout(2 * time.Second),
			kgo.HeartbeatInterval(50 * time.Millisecond),
			kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
			kgo.FetchMaxWait(50 * time.Millisecond),
		}
	})
	p := runPipeline(t, "heard", src, func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) { return m.Data, nil })
	var m *member
	select {
	case m = <-members:
	case <-time.After(wait.Deadline):
		t.Fatal("the member never committed its record")
	}
	status := func() producer.StageStatus { return p.SourceStatus()[0] }
	wait.For(t, "the stage to run", func() bool { return status().State == producer.StateRunning })

	failed := errors.New("heartbeat failing")
	for range kafkareach.SessionFailuresToDegrade {
		m.reach.SessionFailed(failed)
	}
	if st := status(); st.State != producer.StateDegraded {
		t.Fatalf("status %+v after %d failed sessions, want degraded", st, kafkareach.SessionFailuresToDegrade)
	}
	wait.For(t, "the stage to run again on the answers the member's client reads", func() bool {
		return status().State == producer.StateRunning
	}, func() string { return fmt.Sprintf("status %+v", status()) })
	if st := m.Stats(); len(st.Partitions) != 1 {
		t.Fatalf("stats %+v, want the member still holding its partition", st)
	}
}

// Guarantee: the member hears the responses its client reads whole, and
// only those: a read that failed ends no degrade.
func TestHeardHookHearsOnlyResponsesReadWhole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var st recorder
		r := kafkareach.Reach{Health: &st}
		h := heardHook{&r}
		r.SessionStarted()
		for range kafkareach.SessionFailuresToDegrade {
			r.SessionFailed(errors.New("failed"))
		}
		time.Sleep(kafkareach.HeardQuiet)
		h.OnBrokerRead(kgo.BrokerMetadata{}, 0, 0, 0, 0, errors.New("connection reset"))
		if st.recovered != 0 {
			t.Fatalf("recovered on a failed read")
		}
		h.OnBrokerRead(kgo.BrokerMetadata{}, 0, 0, 0, 0, nil)
		if st.recovered != 1 {
			t.Fatalf("recovered %d times on a response read whole, want once", st.recovered)
		}
	})
}

// recorder counts a Reach's reports.
type recorder struct{ degraded, recovered int }

func (r *recorder) Degrade(error) { r.degraded++ }
func (r *recorder) Recovered()    { r.recovered++ }

// runPipeline starts a pipeline named name that reads src and hands each
// message to handle, stopped at t's cleanup.
func runPipeline(t *testing.T, name string, src producer.Source[[]byte], handle func(context.Context, *message.Message[[]byte]) ([]byte, error)) *pipeline.Pipeline[[]byte, []byte] {
	t.Helper()
	return startPipeline(t, pipeline.Options[[]byte, []byte]{
		Name:            name,
		ShutdownTimeout: 10 * time.Second,
		Producer:        producer.Options[[]byte]{Source: src},
		Processors:      processor.Options[[]byte, []byte]{Handle: handle},
	})
}

// startPipeline starts a pipeline of po, stopped at t's cleanup.
func startPipeline(t *testing.T, po pipeline.Options[[]byte, []byte]) *pipeline.Pipeline[[]byte, []byte] {
	t.Helper()
	p, err := pipeline.New(po)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := p.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return p
}

// committingMember receives the first member that sends a commit (from
// send, before the request is built).
func committingMember(t *testing.T) <-chan *member {
	members := make(chan *member, 1)
	beforeCommitSend = func(m *member) {
		select {
		case members <- m:
		default:
		}
	}
	t.Cleanup(func() { beforeCommitSend = nil })
	return members
}

// Guarantee: once a member lost its session (its partitions were lost),
// the answers its client reads no longer end a degrade: the client hears
// the failed joins' answers too, and only a new session or records say
// that the member reads again.
func TestLostSessionEndsNoDegradeOnTheAnswersItsClientReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var st recorder
		m := &member{
			reach:     kafkareach.Reach{Health: &st},
			opts:      &Options{},
			log:       slog.New(slog.DiscardHandler),
			parts:     map[topicPartition]*partition{},
			releasing: map[topicPartition]*partition{},
			moved:     make(chan struct{}),
		}
		h := heardHook{&m.reach}
		m.reach.SessionStarted()
		m.lost(context.Background(), nil, map[string][]int32{})
		for range kafkareach.SessionFailuresToDegrade {
			m.reach.SessionFailed(errors.New("join failing"))
		}
		if st.degraded != 1 {
			t.Fatalf("degraded %d times after %d failed sessions, want once", st.degraded, kafkareach.SessionFailuresToDegrade)
		}
		time.Sleep(kafkareach.HeardQuiet)
		h.OnBrokerRead(kgo.BrokerMetadata{}, 0, 0, 0, 0, nil)
		if st.recovered != 0 {
			t.Fatal("a member that lost its session recovered on an answer its client read")
		}
	})
}
