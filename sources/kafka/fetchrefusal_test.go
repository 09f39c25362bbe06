package kafka_test

import (
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// expectRunFails checks that Run (done) returns within 20s with an error
// wrapping want and brokerErr whose message names what and partition 0
// of the test topic.
func expectRunFails(t *testing.T, done <-chan error, want, brokerErr error, what string) {
	t.Helper()
	var err error
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("Run did not return within 20s of the %s's refusal", what)
	}
	if !errors.Is(err, want) || !errors.Is(err, brokerErr) {
		t.Fatalf("Run = %v, want an error wrapping %v and %v", err, want, brokerErr)
	}
	if msg := err.Error(); !strings.Contains(msg, what) || !strings.Contains(msg, `"`+testTopic+`"/0`) {
		t.Fatalf("Run's error %q does not name the %s and the partition", msg, what)
	}
}

// Guarantee: a Fetch the cluster refuses for a claimed partition with an
// authorization error (TOPIC_AUTHORIZATION_FAILED and its kin) ends the
// member, with either client: Run returns within a bound with an error
// wrapping ErrDenied and the broker's error, naming the fetch and the
// partition, so that the pipeline's restart policy decides, rather than
// the partition stalling for ever behind a WARN line per fetch.
func TestRunFailsWhenAFetchIsRefusedForGood(t *testing.T) {
	for _, code := range []*kerr.Error{kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed} {
		t.Run(code.Message, func(t *testing.T) {
			eachClient(t, func(t *testing.T, cl client) {
				c := newCluster(t, 1, kfake.NumBrokers(1))
				produce(t, c, 1, 0, 10)
				faults := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: testTopic, Err: code, Count: -1})
				t.Cleanup(faults.Remove)
				done := runOnce(t, "fetch-refused", cl.new(t, sourceOptions(c, "g-fetch-refused")))
				expectRunFails(t, done, kafka.ErrDenied, cl.brokerErr(code), "fetch")
			})
		})
	}
}

// Guarantee: a Fetch the cluster answers for a claimed partition with an
// error Kafka says not to retry that is no authorization refusal
// (UNSUPPORTED_COMPRESSION_TYPE, INVALID_RECORD, UNSUPPORTED_VERSION)
// ends the member, with either client: Run returns within a bound with an
// error wrapping ErrFetchRefused and the broker's error, naming the fetch
// and the partition, so that the pipeline's restart policy decides,
// rather than the partition being fetched again for ever.
func TestRunFailsWhenAFetchIsAnsweredWithAnErrorNotToRetry(t *testing.T) {
	for _, code := range []*kerr.Error{kerr.UnsupportedCompressionType, kerr.InvalidRecord, kerr.UnsupportedVersion} {
		t.Run(code.Message, func(t *testing.T) {
			if kerr.IsRetriable(code) {
				t.Fatalf("%v is retriable", code)
			}
			eachClient(t, func(t *testing.T, cl client) {
				c := newCluster(t, 1, kfake.NumBrokers(1))
				produce(t, c, 1, 0, 10)
				faults := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: testTopic, Err: code, Count: -1})
				t.Cleanup(faults.Remove)
				done := runOnce(t, "fetch-not-retried", cl.new(t, sourceOptions(c, "g-fetch-not-retried")))
				expectRunFails(t, done, kafka.ErrFetchRefused, cl.brokerErr(code), "fetch")
			})
		})
	}
}

// Guarantee: a Fetch the cluster refuses for a claimed partition with an
// error that is no refusal for good (UNKNOWN_SERVER_ERROR, which the
// franz-go client hands over; sarama's partition consumer hands over
// every error it does not retry itself) is fetched again, with either
// client: the member does not fail, every record is delivered once the
// cluster answers, and the run of failed fetches is logged on one WARN
// line, not one per fetch.
func TestFetchRefusedForNowIsRetriedWithOneLogLine(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const refusals = 6
		c := newCluster(t, 1, kfake.NumBrokers(1))
		ends := produce(t, c, 1, 0, 10)
		faults := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: testTopic, Err: kerr.UnknownServerError, Count: refusals})
		t.Cleanup(faults.Remove)
		logs := &logtest.Records{}
		o := sourceOptions(c, "g-fetch-retried")
		o.Logger = slog.New(logs)
		l := newLedger()
		done := runOnceInto(t, "fetch-retried", cl.new(t, o), l)
		wait.Within(t, 30*time.Second, "every record once the fetches are answered", func() bool { return l.covers(ends) })
		if n := faults.Hits(); n != refusals {
			t.Fatalf("the fetch was refused %d times, want %d", n, refusals)
		}
		select {
		case err := <-done:
			t.Fatalf("Run = %v after fetches refused with a passing error", err)
		default:
		}
		if n := logs.Count(slog.LevelWarn, "kafka consumer error"); n != 1 {
			t.Fatalf("%d WARN lines for %d refused fetches, want 1", n, refusals)
		}
	})
}

// startRewoundFetchRefusal starts a sarama member whose handler fails
// record 5 of partition 0 once, with FailureRedeliver: the redelivery
// then rewinds the partition, and the Fetch requests of the rewound
// consumer (from offset 5) are answered with code, count times (-1: for
// good). It returns Run's result and the fault.
func startRewoundFetchRefusal(t *testing.T, group string, code *kerr.Error, count int, l *ledger, logger *slog.Logger) (<-chan error, *kfake.FaultHandle) {
	t.Helper()
	c := newCluster(t, 1, kfake.NumBrokers(1))
	produce(t, c, 1, 0, 10)
	var armed atomic.Bool
	faults := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: testTopic, Err: code, Count: count,
		When: func(req kmsg.Request) bool {
			if !armed.Load() {
				return false
			}
			for _, rt := range req.(*kmsg.FetchRequest).Topics {
				for _, rp := range rt.Partitions {
					if rp.Partition == 0 && rp.FetchOffset <= 5 {
						return true // the rewound consumer's
					}
				}
			}
			return false
		}})
	t.Cleanup(faults.Remove)
	o := sourceOptions(c, group)
	o.FailurePolicy = kafka.FailureRedeliver
	o.Logger = logger
	src := newSource(t, o)
	done := make(chan error, 1)
	var failed atomic.Bool
	opts := pipelineOpts("rewound-fetch", src, 1, l, func(m *message.Message[[]byte]) error {
		if md, _ := message.MetadataAs[*kafka.Metadata](m); md.Partition == 0 && md.Offset == 5 && failed.CompareAndSwap(false, true) {
			armed.Store(true)
			return errors.New("fails once")
		}
		return nil
	})
	opts.Producer.Source = onceSource{testSource: src, done: done}
	p := startPipeline(t, opts)
	t.Cleanup(func() { stopPipeline(t, p) })
	return done, faults
}

// Guarantee: with the sarama source, a Fetch of a partition rewound to
// redeliver a failed record (FailureRedeliver) that the cluster refuses
// with an authorization error ends the member: Run returns within a
// bound with an error wrapping ErrDenied and the broker's error, naming
// the fetch and the partition, rather than the rewound partition
// stalling for ever behind a WARN line per fetch.
func TestRunFailsWhenTheRewoundFetchIsRefusedForGood(t *testing.T) {
	code := kerr.TopicAuthorizationFailed
	done, _ := startRewoundFetchRefusal(t, "g-rewound-fetch-refused", code, -1, newLedger(), nil)
	expectRunFails(t, done, kafka.ErrDenied, saramaClient.brokerErr(code), "fetch")
}

// Guarantee: with the sarama source, a Fetch of a rewound partition that
// the cluster refuses with an error that is no refusal for good
// (UNKNOWN_SERVER_ERROR) is fetched again: the member does not fail, the
// failed record is redelivered and handled, and the run of failed
// fetches is logged on one WARN line, not one per fetch.
func TestRewoundFetchRefusedForNowIsRetriedWithOneLogLine(t *testing.T) {
	const refusals = 4
	logs := &logtest.Records{}
	l := newLedger()
	done, faults := startRewoundFetchRefusal(t, "g-rewound-fetch-retried", kerr.UnknownServerError, refusals, l, slog.New(logs))
	wait.Within(t, 30*time.Second, "the failed record redelivered once the fetches are answered", func() bool {
		return faults.Hits() == refusals && l.times(rec{0, 5}) >= 1
	})
	select {
	case err := <-done:
		t.Fatalf("Run = %v after the rewound fetches were refused with a passing error", err)
	default:
	}
	if n := logs.Count(slog.LevelWarn, "kafka redelivery consumer error"); n != 1 {
		t.Fatalf("%d WARN lines for %d refused fetches of the rewound partition, want 1", n, refusals)
	}
}

// times reports how many times r was handled.
func (l *ledger) times(r rec) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen[r]
}
