package kafka_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// Guarantee: a start offset lookup (OffsetTimestamp) whose metadata or
// leader lookup the cluster refuses with an authorization error
// (TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED,
// CLUSTER_AUTHORIZATION_FAILED on the topic's metadata, asked for after
// a listing refused with LEADER_NOT_AVAILABLE) ends the member, with
// either client: Run returns within a bound with an error wrapping
// ErrDenied and the broker's error, rather than the lookup being tried
// again for ever.
func TestRunFailsWhenTheStartLookupsMetadataIsDenied(t *testing.T) {
	for _, code := range []*kerr.Error{kerr.TopicAuthorizationFailed, kerr.GroupAuthorizationFailed, kerr.ClusterAuthorizationFailed} {
		t.Run(code.Message, func(t *testing.T) {
			eachClient(t, func(t *testing.T, cl client) {
				c := newCluster(t, 1, kfake.NumBrokers(1))
				produce(t, c, 1, 0, 10)
				var armed atomic.Bool
				// The first listing by time is refused for now, which
				// makes the lookup ask for the topic's metadata (sarama:
				// its leader, refreshed; franz-go: a new lookup client's).
				c.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
					c.KeepControl()
					if !byTime(req) || !armed.CompareAndSwap(false, true) {
						return nil, nil, false
					}
					return testbroker.RefuseListOffsets(req, kerr.LeaderNotAvailable.Code), nil, true
				})
				faults := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Metadata}, Topic: testTopic, Err: code, Count: -1,
					When: func(kmsg.Request) bool { return armed.Load() }})
				t.Cleanup(faults.Remove)
				o := sourceOptions(c, "g-lookup-metadata-denied")
				o.InitialOffset, o.StartTime = kafka.OffsetTimestamp, time.Now().Add(-time.Hour)
				err := runStage(t, cl.new(t, o), 20*time.Second)
				if brokerErr := cl.brokerErr(code); !errors.Is(err, kafka.ErrDenied) || !errors.Is(err, brokerErr) {
					t.Fatalf("Run = %v, want an error wrapping %v and %v", err, kafka.ErrDenied, brokerErr)
				}
				// franz-go's group client, which joins the group as Run
				// checks the topics, may be refused the topic's metadata
				// first: as it checks the topics, or as it fetches.
				if msg := err.Error(); !strings.Contains(msg, "start offsets") && !strings.Contains(msg, "fetch") &&
					!strings.Contains(msg, `topic "`+testTopic+`"`) {
					t.Fatalf("Run's error %q names neither the start offsets, the fetch nor the topic", msg)
				}
				if faults.Hits() == 0 {
					t.Fatal("the metadata refusal was not exercised")
				}
			})
		})
	}
}

// Guarantee: a drain stops a new claim's start offset lookup that the
// cluster keeps refusing with an error Kafka says to retry, with either
// client: the lookup ends (a DEBUG line says the member drains) while
// the pipeline still waits for an in-flight message, rather than being
// tried again until Close. The claim starts nowhere; with sarama, as a
// draining member claims nothing, the member also leaves the group at
// once (its other claims commit what was handled and let go).
func TestDrainStopsARetriedStartOffsetLookup(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		c := newCluster(t, 2, kfake.NumBrokers(1))
		group := "g-lookup-drained"
		produce(t, c, 2, 0, 20)
		commitOutside(t, c, group, map[int32]int64{0: 0}) // partition 0 starts there, without a lookup
		refused := refuseListings(c, kerr.LeaderNotAvailable, func() bool { return true })
		logs := newLogBook()
		o := sourceOptions(c, group)
		o.InitialOffset, o.StartTime = kafka.OffsetTimestamp, time.Now().Add(-time.Hour)
		o.RevokeTimeout = 500 * time.Millisecond
		o.Logger = logs.logger()
		release := make(chan struct{})
		var held atomic.Bool
		opts := pipelineOpts("lookup-drained", cl.new(t, o), 1, newLedger(), func(*message.Message[[]byte]) error {
			held.Store(true)
			<-release // holds the drain until the test lets go
			return nil
		})
		opts.ShutdownTimeout = 30 * time.Second
		p := startPipeline(t, opts)
		var releaseOnce atomic.Bool
		let := func() {
			if releaseOnce.CompareAndSwap(false, true) {
				close(release)
			}
		}
		t.Cleanup(let)
		wait.Within(t, 20*time.Second, "a held record and partition 1's lookup to fail", func() bool {
			return held.Load() && refused.Load() >= 2
		})
		stopped := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			stopped <- p.Stop(ctx)
		}()
		wait.Within(t, 15*time.Second, "the drain to stop the start offset lookup", func() bool {
			return len(logs.find(func(r logRecord) bool {
				return r.Level == slog.LevelDebug && strings.Contains(r.Text, "start offset") && strings.Contains(r.Text, "the member drains")
			})) > 0
		})
		if cl.name == saramaClient.name {
			wait.Within(t, 15*time.Second, "the draining member to leave the group", func() bool {
				gi := c.GroupInfo(group)
				return gi != nil && len(gi.Members) == 0
			})
		}
		let()
		if err := <-stopped; err != nil {
			t.Fatalf("stop: %v", err)
		}
	})
}

// Guarantee: a subscribed topic whose metadata the cluster refuses with
// an authorization error (TOPIC_AUTHORIZATION_FAILED) as Run checks the
// topics makes Run fail at once with an error wrapping ErrDenied and the
// broker's error, naming the topic, with either client, rather than
// ErrConnect, which says the cluster could not be reached.
func TestRunFailsAtOnceWhenTheTopicsMetadataIsDenied(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		c := newCluster(t, 1, kfake.NumBrokers(1))
		code := kerr.TopicAuthorizationFailed
		faults := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Metadata}, Topic: testTopic, Err: code, Count: -1})
		t.Cleanup(faults.Remove)
		err := runStage(t, cl.new(t, sourceOptions(c, "g-topic-denied")), 20*time.Second)
		if !errors.Is(err, kafka.ErrDenied) || !errors.Is(err, cl.brokerErr(code)) || errors.Is(err, kafka.ErrConnect) {
			t.Fatalf("Run = %v, want an error wrapping %v and %v, not %v", err, kafka.ErrDenied, cl.brokerErr(code), kafka.ErrConnect)
		}
		if msg := err.Error(); !strings.Contains(msg, `"`+testTopic+`"`) {
			t.Fatalf("Run's error %q does not name the topic", msg)
		}
	})
}

// Guarantee: a cluster that answers the connection check but fails every
// metadata request (here INVALID_TOPIC_EXCEPTION) makes Run fail with an
// error wrapping ErrConnect and the broker's error, with either client,
// so that the cause is told apart with errors.Is.
func TestRunFailsWithTheBrokersErrorWhenTheMetadataIsRefused(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		c := newCluster(t, 1, kfake.NumBrokers(1))
		code := kerr.InvalidTopicException
		faults := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Metadata}, Err: code, Count: -1})
		t.Cleanup(faults.Remove)
		err := runStage(t, cl.new(t, sourceOptions(c, "g-metadata-refused")), 20*time.Second)
		if !errors.Is(err, kafka.ErrConnect) || !errors.Is(err, cl.brokerErr(code)) {
			t.Fatalf("Run = %v, want an error wrapping %v and %v", err, kafka.ErrConnect, cl.brokerErr(code))
		}
	})
}
