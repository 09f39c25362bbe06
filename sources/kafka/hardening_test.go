package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/redact"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/testnet"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/sources/kafka/franz"
)

// Guarantee: a source that cannot reach its broker (a port that accepts
// TCP but never answers, nothing listening, or something other than a
// broker that answers garbage and closes the connection) with sarama's default
// configuration gets its first connection failure logged at WARN within
// 10s of the start, naming the broker and the cause, on one line.
func TestUnreachableBrokerWarnsWithinTenSeconds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		addr  func(*testing.T) string
		cause map[string]string // per client
	}{
		{"silent listener", func(t *testing.T) string { return testnet.SilentListener(t) },
			map[string]string{"sarama": "i/o timeout", "franz": "no answer within"}},
		{"nothing listening", func(t *testing.T) string { return testnet.ClosedPort(t) }, map[string]string{"sarama": "connection refused", "franz": "connection refused"}},
		{"garbage answer", func(t *testing.T) string { return testnet.GarbageListener(t) }, map[string]string{"sarama": "too large or too small", "franz": "invalid large response size"}},
	} {
		eachClient(t, func(t *testing.T, cl client) {
			t.Run(tc.name, func(t *testing.T) {
				unreachableWarns(t, cl, tc.addr(t), tc.cause[cl.name])
			})
		})
	}
}

// unreachableWarns checks that a source of cl that cannot reach addr logs
// a WARN naming it and cause within 10s.
func unreachableWarns(t *testing.T, cl client, addr, cause string) {
	book := newLogBook()
	src := cl.new(t, kafka.Options{Brokers: []string{addr}, GroupID: "g-unreachable", Topics: []string{testTopic}})
	po := pipelineOpts("unreachable", src, 1, newLedger(), nil)
	po.Logger = book.logger()
	start := time.Now()
	p := startPipeline(t, po)
	defer stopPipeline(t, p)
	var warned []logRecord
	wait.Within(t, 10*time.Second-time.Since(start), "a WARN naming the broker", func() bool {
		warned = book.find(func(r logRecord) bool { return r.Level >= slog.LevelWarn && strings.Contains(r.Text, addr) })
		return len(warned) > 0
	})
	t.Logf("after %s: %s", time.Since(start).Round(time.Millisecond), warned[0].Text)
	if !strings.Contains(warned[0].Text, cause) {
		t.Errorf("the WARN does not give the cause %q: %s", cause, warned[0].Text)
	}
	if strings.ContainsAny(warned[0].Text, "\r\n") {
		t.Errorf("the WARN spans several lines: %q", warned[0].Text)
	}
}

// onceSource runs the Kafka source's Run once and reports its result on
// done; it then reports itself exhausted, so that the pipeline drains and
// stops by itself instead of restarting the source.
type onceSource struct {
	testSource
	done chan error
}

func (s onceSource) Run(ctx context.Context, st *producer.Stage[[]byte]) error {
	s.done <- s.testSource.Run(ctx, st)
	return nil
}

// runOnce runs src once as the only stage of a pipeline and returns a
// channel that receives what its Run returned; the pipeline is stopped when
// the test ends.
func runOnce(t *testing.T, name string, src testSource) <-chan error {
	t.Helper()
	return runOnceInto(t, name, src, newLedger())
}

// runOnceInto is runOnce whose handler records what it sees in l.
func runOnceInto(t *testing.T, name string, src testSource, l *ledger) <-chan error {
	t.Helper()
	return startOnce(t, pipelineOpts(name, src, 1, l, nil), src)
}

// startOnce starts the pipeline of opts with src, run once, as its
// source, stopped when the test ends, and returns a channel that
// receives what src's Run returned.
func startOnce(t *testing.T, opts pipeline.Options[[]byte, []byte], src testSource) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	opts.Producer.Source = onceSource{testSource: src, done: done}
	p := startPipeline(t, opts)
	t.Cleanup(func() { stopPipeline(t, p) })
	return done
}

// runStage runs src once as the only stage of a pipeline and returns Run's
// error, or fails the test when Run has not returned within limit.
func runStage(t *testing.T, src testSource, limit time.Duration) error {
	t.Helper()
	done := runOnce(t, "direct", src)
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("Run did not return within %s", limit)
		return nil
	}
}

// expectRunning fails t if Run (done) has returned, with its error and
// after, which says what the member has been through.
func expectRunning(t *testing.T, done <-chan error, after string) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("Run = %v %s", err, after)
	default:
	}
}

// Guarantee: a subscribed topic the cluster does not have makes Run fail
// promptly with an error wrapping ErrUnknownTopic that names the topic
// (quoted), instead of retrying inside sarama forever.
func TestMissingTopicFailsRun(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		c := newCluster(t, 1)
		opts := sourceOptions(c, "g-missing-topic")
		opts.Topics = []string{testTopic, "evnets\n"}
		src := cl.new(t, opts)
		defer func() { _ = src.Close(context.Background()) }()
		err := runStage(t, src, 15*time.Second)
		if !errors.Is(err, kafka.ErrUnknownTopic) || !errors.Is(err, cl.brokerErr(kerr.UnknownTopicOrPartition)) {
			t.Fatalf("Run = %v, want ErrUnknownTopic", err)
		}
		if msg := err.Error(); !strings.Contains(msg, `"evnets\n"`) || strings.Contains(msg, `"`+testTopic+`"`) ||
			strings.ContainsAny(msg, "\r\n") {
			t.Fatalf("error %q must name the missing topic quoted, only it, on one line", msg)
		}
	})
}

// deleteTopic deletes topic from the cluster.
func deleteTopic(t *testing.T, c *kfake.Cluster, topic string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrDeleteTopicsRequest()
	rt := kmsg.NewDeleteTopicsRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.TopicNames = []string{topic}
	req.TimeoutMillis = 5000
	resp, err := req.RequestWith(context.Background(), cl)
	if err == nil && len(resp.Topics) == 1 && resp.Topics[0].ErrorCode != 0 {
		err = fmt.Errorf("error code %d", resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("delete topic %q: %v", topic, err)
	}
}

// Guarantee: a topic that is deleted while the member runs makes Run fail
// with ErrUnknownTopic at the next rebalance, rather than rejoin the group
// forever.
func TestDeletedTopicFailsRun(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		c := newCluster(t, 1, kfake.SeedTopics(1, "other"))
		src := cl.new(t, sourceOptions(c, "g-deleted-topic"))
		defer func() { _ = src.Close(context.Background()) }()
		done := runOnce(t, "direct", src)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if _, err := c.WaitGroupInfo(ctx, "g-deleted-topic", func(gi *kfake.GroupInfo) bool { return gi != nil && gi.NumAssigned() == 1 }); err != nil {
			t.Fatal(err)
		}
		deleteTopic(t, c, testTopic)
		// Another member joins: the rebalance starts a new session, which
		// finds the topic gone.
		bo := sourceOptions(c, "g-deleted-topic")
		bo.Topics = []string{"other"}
		b := startPipeline(t, pipelineOpts("b", cl.new(t, bo), 1, newLedger(), nil))
		defer stopPipeline(t, b)
		select {
		case err := <-done:
			if !errors.Is(err, kafka.ErrUnknownTopic) || !strings.Contains(err.Error(), `"`+testTopic+`"`) {
				t.Fatalf("Run = %v, want ErrUnknownTopic naming %q", err, testTopic)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("Run kept going after its topic was deleted")
		}
	})
}

// Guarantee: the source logs through the producer stage's logger when its
// own Logger is nil, and a failed message is logged at WARN once (by the
// stage that failed it), not once more by the source, even when the source
// and the pipeline share one logger. The pipeline logs every failure here
// (a negative FailureLogInterval), so that each failed message has its
// line, which names the record by its topic, partition and offset.
func TestFailedMessageLoggedOnce(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		for _, shared := range []bool{false, true} {
			name := "stage logger"
			if shared {
				name = "same logger given to the source"
			}
			t.Run(name, func(t *testing.T) {
				c := newCluster(t, 1)
				ends := produce(t, c, 1, 0, 20)
				group := "g-logged-once"
				if shared {
					group += "-shared"
				}
				book := newLogBook()
				opts := sourceOptions(c, group)
				opts.Logger = nil
				if shared {
					opts.Logger = book.logger()
				}
				l := newLedger()
				po := pipelineOpts("logged-once", cl.new(t, opts), 1, l, func(m *message.Message[[]byte]) error {
					if md, _ := message.MetadataAs[*kafka.Metadata](m); md.Offset%5 == 2 {
						l.add(md)
						return errors.New("poison record")
					}
					return nil
				})
				po.Logger = book.logger()
				po.FailureLogInterval = -1
				p := startPipeline(t, po)
				wait.Within(t, 20*time.Second, "commits at the end", func() bool { return equalOffsets(committed(c, group), ends) })
				stopPipeline(t, p)
				warned := book.find(func(r logRecord) bool {
					return r.Level >= slog.LevelWarn && strings.Contains(r.Text, "poison record")
				})
				if len(warned) != 4 {
					for _, r := range warned {
						t.Log(r.Text)
					}
					t.Fatalf("%d WARN lines for 4 failed messages, want one each", len(warned))
				}
				for i, off := range []int{2, 7, 12, 17} {
					want := fmt.Sprintf("source=[topic=events partition=0 offset=%d]", off)
					if !strings.Contains(warned[i].Text, want) {
						t.Fatalf("failure line %q does not locate its record (%s)", warned[i].Text, want)
					}
				}
				if got := book.find(func(r logRecord) bool { return r.Msg == "kafka group session started" }); len(got) == 0 {
					t.Fatal("the source's lines did not reach the logger")
				} else if !strings.Contains(got[0].Text, "stage=logged-once.producer.0") {
					t.Fatalf("the source's line does not name its stage: %s", got[0].Text)
				}
			})
		}
	})
}

// Guarantee: a source whose Logger is nil, in a pipeline whose Logger is
// nil too, logs to slog.Default(), with its stage's name; nothing is
// silenced.
func TestNilLoggersLogToTheDefault(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		lines := logtest.CaptureDefault(t)
		c := newCluster(t, 1)
		opts := sourceOptions(c, "g-default-logger")
		opts.Logger = nil
		po := pipelineOpts("default-logger", cl.new(t, opts), 1, newLedger(), nil)
		po.Logger = nil
		p := startPipeline(t, po)
		defer stopPipeline(t, p)
		wait.Within(t, 20*time.Second, "the session's start on slog.Default()", func() bool {
			return lines.Count(`msg="kafka group session started"`, "stage=default-logger.producer.0") == 1
		}, func() string { return strings.Join(lines.All(), "") })
	})
}

// Guarantee: no line the source logs repeats an attribute key (its
// logger's attributes included).
func TestLogLinesHaveUniqueKeys(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		c := newCluster(t, 2)
		ends := produce(t, c, 2, 0, 40)
		book := newLogBook()
		opts := sourceOptions(c, "g-unique-keys")
		opts.Logger = nil
		po := pipelineOpts("unique-keys", cl.new(t, opts), 1, newLedger(), nil)
		po.Logger = book.logger()
		p := startPipeline(t, po)
		wait.Within(t, 20*time.Second, "commits at the end", func() bool { return equalOffsets(committed(c, "g-unique-keys"), ends) })
		stopPipeline(t, p)
		kafkaLines := 0
		for _, r := range book.records() {
			if !strings.HasPrefix(r.Msg, "kafka ") {
				continue
			}
			kafkaLines++
			seen := map[string]bool{}
			for _, k := range r.Keys {
				if seen[k] {
					t.Errorf("key %q repeated in %s", k, r.Text)
				}
				seen[k] = true
			}
		}
		if kafkaLines == 0 {
			t.Fatal("the source logged nothing")
		}
	})
}

// Guarantee: the source's own timeouts apply only to fields the user left
// at sarama's defaults; a value set in the user's Config is kept; a nil
// Config is left alone.
func TestSaramaDefaultsKeepExplicitValues(t *testing.T) {
	kafka.SaramaDefaults(nil)
	def := sarama.NewConfig()
	kafka.SaramaDefaults(def)
	if def.Net.DialTimeout != kafka.DefaultDialTimeout || def.Metadata.Timeout != kafka.DefaultMetadataTimeout {
		t.Fatalf("defaults not applied: dial %s, metadata %s", def.Net.DialTimeout, def.Metadata.Timeout)
	}
	if want := sarama.NewConfig(); def.Net.ReadTimeout != want.Net.ReadTimeout || def.Metadata.Retry.Max != want.Metadata.Retry.Max || def.Metadata.Retry.Backoff != want.Metadata.Retry.Backoff {
		t.Fatalf("read timeout %s / metadata retry %+v changed; sarama's are kept", def.Net.ReadTimeout, def.Metadata.Retry)
	}
	own := sarama.NewConfig()
	own.Net.DialTimeout = 12 * time.Second
	own.Metadata.Timeout = 3 * time.Second
	kafka.SaramaDefaults(own)
	if own.Net.DialTimeout != 12*time.Second || own.Metadata.Timeout != 3*time.Second {
		t.Fatalf("explicit values overridden: dial %s, metadata %s", own.Net.DialTimeout, own.Metadata.Timeout)
	}
}

// keep the imports used by the tests above when some are skipped.
var (
	_ = pipeline.ErrShutdownTimeout
	_ = processor.DefaultMaxDemand
)

// Guarantee: when Kafka refuses the member's permission on its group, Run
// fails at once with ErrDenied wrapping the client's refusal, rather than
// retrying a join that cannot succeed (with sarama, ten times its rebalance
// retry backoff).
func TestRunFailsAtOnceWhenTheGroupIsDenied(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		c := newCluster(t, 2)
		c.ControlKey(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			resp := req.(*kmsg.JoinGroupRequest).ResponseKind().(*kmsg.JoinGroupResponse)
			resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
			return resp, nil, true
		})
		o := sourceOptions(c, "g-denied")
		const backoff = 30 * time.Second
		o.Config.Consumer.Group.Rebalance.Retry.Backoff = backoff
		start := time.Now()
		var err error
		select {
		case err = <-runOnce(t, "denied", cl.new(t, o)):
		case <-time.After(2 * backoff):
			t.Fatal("Run did not return")
		}
		if !errors.Is(err, kafka.ErrDenied) || !errors.Is(err, cl.brokerErr(kerr.GroupAuthorizationFailed)) {
			t.Fatalf("Run = %v, want ErrDenied wrapping the group authorization failure", err)
		}
		if took := time.Since(start); took >= backoff {
			t.Fatalf("Run failed after %v, not before the first retry backoff (%v)", took, backoff)
		}
	})
}

// Guarantee: a broker that refuses the member's SASL credentials makes Run
// fail at once with an error wrapping ErrDenied (and the broker's
// refusal), as Run documents, rather than ErrConnect's "no broker
// answered"; the password is not in it.
func TestRunFailsAtOnceWhenTheCredentialsAreRefused(t *testing.T) {
	const password = "pw-wrong-8d1e"
	eachClient(t, func(t *testing.T, cl client) {
		c := newCluster(t, 1, kfake.EnableSASL(), kfake.Superuser("PLAIN", "svc", "pw-right"))
		refuseLogins(c, nil)
		o := sourceOptions(c, "g-sasl-refused")
		withPlainLogin(&o, "svc", password)
		var src testSource
		if cl.name == "sarama" {
			src = newSource(t, o)
		} else {
			fo := franzOptions(o)
			fo.ClientOptions = append(fo.ClientOptions, kgo.SASL(plain.Auth{User: "svc", Pass: password}.AsMechanism()))
			s, err := franz.New(fo)
			if err != nil {
				t.Fatal(err)
			}
			src = s
		}
		err := runStage(t, src, 15*time.Second)
		if !errors.Is(err, kafka.ErrDenied) || !errors.Is(err, cl.brokerErr(kerr.SaslAuthenticationFailed)) {
			t.Fatalf("Run = %v, want ErrDenied wrapping the SASL refusal", err)
		}
		if strings.Contains(err.Error(), password) {
			t.Fatalf("the error shows the password: %v", err)
		}
	})
}

// refuseLogins makes c answer every SASL authentication with
// SASL_AUTHENTICATION_FAILED and message (nil for none): kfake itself
// drops the connection of a failed authentication, where a Kafka broker
// answers that error first.
func refuseLogins(c *kfake.Cluster, message *string) {
	c.ControlKey(int16(kmsg.SASLAuthenticate), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		resp := req.(*kmsg.SASLAuthenticateRequest).ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = message
		return resp, nil, true
	})
}

// Guarantee: a cluster whose login refusal quotes the SASL user and
// password of Config shows them in neither the error Run returns nor any
// line the source logs (the connection check's warning included); the
// error still wraps ErrConnect and says what was refused.
func TestALoginRefusalQuotingTheCredentialsShowsThemNowhere(t *testing.T) {
	const user, password = "svc-7d1e", "s3cr3t-XYZ"
	c := newCluster(t, 1, kfake.EnableSASL(), kfake.Superuser(sarama.SASLTypePlaintext, user, "pw-right"))
	msg := "refused for " + user + " with password " + password
	refuseLogins(c, &msg)
	var logs logtest.Lines
	o := sourceOptions(c, "g-sasl-quoted")
	o.ConnectTimeout = time.Second
	o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	withPlainLogin(&o, user, password)
	err := runStage(t, newSource(t, o), 15*time.Second)
	if !errors.Is(err, kafka.ErrConnect) || !strings.Contains(err.Error(), "SASL Authentication failed: refused for "+redact.Masked) {
		t.Fatalf("Run = %v, want ErrConnect with the refusal, credentials redacted", err)
	}
	for what, s := range map[string]string{"Run's error": err.Error(), "the logs": strings.Join(logs.All(), "")} {
		for _, secret := range []string{user, password} {
			if strings.Contains(s, secret) {
				t.Errorf("%s show a credential: %s", what, s)
			}
		}
	}
	if logs.Count("no broker answered") == 0 {
		t.Errorf("no warning about the refused brokers logged: %q", logs.All())
	}
}

// withPlainLogin makes o's sarama source log in with SASL PLAIN as user.
func withPlainLogin(o *kafka.Options, user, password string) {
	o.Config.Net.SASL.Enable = true
	o.Config.Net.SASL.Mechanism = sarama.SASLTypePlaintext
	o.Config.Net.SASL.User, o.Config.Net.SASL.Password = user, password
}

// Guarantee: group sessions that fail with an error quoting the SASL
// password (here a coordinator naming a protocol that holds it) degrade
// the stage with that error, the password redacted, and log it
// redacted.
func TestAFailedSessionQuotingThePasswordDegradesTheStageWithoutShowingIt(t *testing.T) {
	const user, password = "svc-7d1e", "s3cr3t-XYZ"
	c := newCluster(t, 1, kfake.EnableSASL(), kfake.Superuser(sarama.SASLTypePlaintext, user, password))
	c.ControlKey(int16(kmsg.JoinGroup), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := r.(*kmsg.JoinGroupRequest)
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		proto := "range-" + password
		resp.Generation, resp.Protocol, resp.ProtocolType = 1, &proto, &req.ProtocolType
		resp.LeaderID, resp.MemberID = "another-member", "this-member"
		return resp, nil, true
	})
	var logs logtest.Lines
	o := sourceOptions(c, "g-session-quoted")
	o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	withPlainLogin(&o, user, password)
	p := startPipeline(t, pipelineOpts("session-quoted", newSource(t, o), 1, newLedger(), nil))
	t.Cleanup(func() { stopPipeline(t, p) })
	st := waitState(t, func() producer.StageStatus { return p.SourceStatus()[0] }, producer.StateDegraded, 30*time.Second, "the sessions failing")
	if st.LastError == nil || st.LastError.Error() != "unable to find selected strategy: range-"+redact.Masked {
		t.Errorf("the degraded stage's error is %v, want the session's, the password redacted", st.LastError)
	}
	if lines := logs.Matching(password); len(lines) > 0 {
		t.Errorf("lines show the password: %q", lines)
	}
}

// Guarantee: a running member whose cluster drops its fetches and then
// refuses its logins with a message quoting the SASL password (sarama's
// lookups of the partitions' leaders run out of brokers) degrades the
// stage with that error, the password redacted, and logs it redacted.
func TestAnOutageWhoseLoginRefusalsQuoteThePasswordDegradesTheStageWithoutShowingIt(t *testing.T) {
	const user, password = "svc-7d1e", "s3cr3t-XYZ"
	c := newCluster(t, 2, kfake.EnableSASL(), kfake.Superuser(sarama.SASLTypePlaintext, user, password))
	var logs logtest.Lines
	o := sourceOptions(c, "g-outage-quoted")
	o.Config.Consumer.Group.Session.Timeout = 30 * time.Second // outlives the outage
	o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	withPlainLogin(&o, user, password)
	status := startClaimingBoth(t, "outage-quoted", newSource(t, o))

	msg := "refused for " + user + " with password " + password
	refuseLogins(c, &msg)
	testbroker.Inject(c, kmsg.Key(-1), 0, func(req kmsg.Request) bool {
		switch kmsg.Key(req.Key()) {
		case kmsg.ApiVersions, kmsg.SASLHandshake, kmsg.SASLAuthenticate, kmsg.FindCoordinator, kmsg.Heartbeat:
			return false
		}
		return true
	}).Every(1)
	st := waitState(t, status, producer.StateDegraded, 30*time.Second, "the cluster dropped the fetches and refused the logins")
	t.Logf("degraded: %v", st.LastError)
	if st.LastError == nil || strings.Contains(st.LastError.Error(), password) || !strings.Contains(st.LastError.Error(), redact.Masked) {
		t.Errorf("the degraded stage's error is %v, want the refusal, the password redacted", st.LastError)
	}
	if lines := logs.Matching(password); len(lines) > 0 {
		t.Errorf("lines show the password: %q", lines)
	}
}

// Guarantee: the source's Close returns once its context's deadline has
// passed when the cluster stops answering (the final commit and the leave
// hang), not after a client's read or request timeout: within
// testbroker.HungGrace of it, as Close's leave past the deadline takes
// claim.LeaveGrace and a machine that stalls the process adds to that (the
// pipeline's own CancelGrace may then pass first, and Stop reports the
// Close as still running). The connections the member cuts itself then are
// not reported as closed with an error at WARN.
func TestCloseReturnsByItsDeadlineWhenTheClusterHangs(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		c := newCluster(t, 2)
		ends := produce(t, c, 2, 0, 100)
		l := newLedger()
		var lines logtest.Lines
		o := sourceOptions(c, "g-hung")
		o.Logger = slog.New(slog.NewTextHandler(&lines, nil))
		src := timedClose{cl.new(t, o), make(chan time.Duration, 1)}
		po := pipelineOpts("hung", src, 1, l, nil)
		po.ShutdownTimeout = 2 * time.Second
		p := startPipeline(t, po)
		wait.Within(t, 20*time.Second, "every record handled", func() bool { return l.covers(ends) })
		testbroker.HangKafka(t, c)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var late *pipeline.ShutdownTimeoutError
		if err := p.Stop(ctx); err != nil && (!errors.As(err, &late) || len(late.Running) != 1 || late.Running[0].Kind != pipeline.KindSourceClose) {
			t.Fatalf("Stop = %v, want nil, or a shutdown timeout with only the source's Close running", err)
		}
		select {
		case past := <-src.past:
			if past > testbroker.HungGrace {
				t.Fatalf("the source's Close returned %v after its deadline, want within %v", past, testbroker.HungGrace)
			}
		case <-time.After(po.ShutdownTimeout + testbroker.HungGrace):
			t.Fatalf("the source's Close did not return within %v of its deadline", testbroker.HungGrace)
		}
		lines.Want(t, 0, "WARN lines of connections the member cut itself", "closed with an error", "level=WARN")
	})
}

// timedClose is a source whose Close sends how long after its context's
// deadline it returned.
type timedClose struct {
	testSource
	past chan time.Duration
}

func (s timedClose) Close(ctx context.Context) error {
	err := s.testSource.Close(ctx)
	deadline, _ := ctx.Deadline()
	s.past <- time.Since(deadline)
	return err
}

// Guarantee: a claim whose start offset lookup (OffsetTimestamp's
// ListOffsets by time) the cluster does not answer does not hold the
// member's Close: the lookup ends with the member's session, and Stop
// returns once the member has left, not after the client's read timeout
// (sarama's 30s, franz-go's request timeout) or Stop's own deadline. One
// broker leads the partition and coordinates the group, so that a lookup
// on the member's connection to it would hold the member's leave.
func TestStopDoesNotWaitForAHungStartOffsetLookup(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		c := newCluster(t, 1, kfake.NumBrokers(1))
		held, _ := holdRequests(t, c, kmsg.ListOffsets, 0, func(req kmsg.Request) bool {
			for _, rt := range req.(*kmsg.ListOffsetsRequest).Topics {
				for _, rp := range rt.Partitions {
					if rp.Timestamp >= 0 { // by time: the start offset lookup
						return true
					}
				}
			}
			return false
		})
		o := sourceOptions(c, "g-hung-lookup")
		o.InitialOffset, o.StartTime = kafka.OffsetTimestamp, time.Now()
		p := startHeld(t, pipelineOpts("hung-lookup", cl.new(t, o), 1, newLedger(), nil), held,
			"the member never looked its start offset up")
		stopsWithin(t, p, testbroker.HungGrace, "the start offset lookup unanswered")
	})
}

// Guarantee: a cluster that never answers the lookup of a claim's start
// offset (OffsetTimestamp) holds the claim's start no longer than the
// lookup's own bound (sarama's Config.Metadata.Timeout, franz-go's
// LookupTimeout), however long the client itself would wait and retry:
// the member then logs why, and looks again (sarama within the claim, on
// a connection of its own, franz-go on a client of its own). Once the
// cluster answers, every record at or after the start time is delivered.
func TestStartOffsetLookupGivesUpAfterItsBound(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		h := startHungLookup(t, cl, "lookup-bound")
		if h.l.covers(map[int32]int64{0: 1}) {
			t.Fatal("a record was delivered before the start offset was found")
		}
		h.releaseAndWait(t)
	})
}

// Guarantee: a cluster that keeps leaving a claim's start offset lookup
// unanswered after it first gave up makes the member look again, each
// attempt bounded as the first (1s here, though franz-go's own request
// timeout is 5m), on connections of its own: the member's heartbeats never
// wait behind an unanswered listing, and it stays in its group
// generation (both look again within the session: sarama within the
// claim, franz-go rather than leave the lookup to its group client), so
// that no rebalance disturbs the group. Once the cluster answers, every
// record at or after the start time is delivered.
func TestStartOffsetLookupTriesAgainWithoutHoldingTheMember(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		h := startHungLookup(t, cl, "lookup-again")
		var member string
		var generation int32
		if gi := h.c.GroupInfo(h.group); gi != nil && len(gi.Members) == 1 {
			member, generation = gi.Members[0].MemberID, gi.Epoch
		} else {
			t.Fatalf("group %q is %+v once the lookup gave up, want it to have the member", h.group, gi)
		}
		for i := range 3 {
			select {
			case <-h.held:
			case <-time.After(30 * time.Second):
				t.Fatalf("%d listings after the first lookup gave up, then none for 30s: the member waits for an unanswered one", i)
			}
		}
		gi := h.c.GroupInfo(h.group)
		if gi == nil || !slices.ContainsFunc(gi.Members, func(gm kfake.GroupMember) bool { return gm.MemberID == member }) {
			t.Fatalf("member %q is no longer in group %q (%+v) after three more unanswered lookups", member, h.group, gi)
		}
		if gi.Epoch != generation {
			t.Fatalf("group %q went from generation %d to %d during three more unanswered lookups: the member rejoined", h.group, generation, gi.Epoch)
		}
		h.releaseAndWait(t)
	})
}

// hungLookup is a pipeline of one member whose claim of a one-partition
// topic (20 records) starts at a time (OffsetTimestamp) on a one-broker
// cluster that holds every ListOffsets request by time: held receives a
// value when one is held, and release lets them all go (see
// holdRequests).
type hungLookup struct {
	c       *kfake.Cluster
	group   string
	ends    map[int32]int64
	held    <-chan struct{}
	release func()
	l       *ledger
}

// startHungLookup starts a hungLookup of cl named name (its group is
// "g-"+name), stopped when t ends, whose lookup gives up after 1s
// (sarama's Config.Metadata.Timeout, franz-go's LookupTimeout) while
// franz-go's own requests would wait 5m, and returns once the member has
// logged that its first lookup gave up.
func startHungLookup(t *testing.T, cl client, name string) *hungLookup {
	t.Helper()
	// franz-go's own retries would wait minutes for each unanswered
	// listing, well past the test's waits.
	cl = cl.withKgo(kgo.RequestTimeoutOverhead(5*time.Minute), kgo.RetryTimeout(0))
	h := &hungLookup{c: newCluster(t, 1, kfake.NumBrokers(1)), group: "g-" + name, l: newLedger()}
	start := time.Now()
	h.ends = produce(t, h.c, 1, 0, 20)
	h.held, h.release = holdRequests(t, h.c, kmsg.ListOffsets, 0, func(req kmsg.Request) bool {
		return slices.ContainsFunc(req.(*kmsg.ListOffsetsRequest).Topics, func(rt kmsg.ListOffsetsRequestTopic) bool {
			return slices.ContainsFunc(rt.Partitions, func(rp kmsg.ListOffsetsRequestTopicPartition) bool { return rp.Timestamp >= 0 })
		})
	})
	book := newLogBook()
	o := sourceOptions(h.c, h.group)
	o.InitialOffset, o.StartTime = kafka.OffsetTimestamp, start
	o.Config.Metadata.Timeout = time.Second
	o.Logger = book.logger()
	p := startPipeline(t, pipelineOpts(name, cl.new(t, o), 1, h.l, nil))
	t.Cleanup(func() { stopPipeline(t, p) })
	select {
	case <-h.held:
	case <-time.After(30 * time.Second):
		t.Fatal("the member never looked its start offset up")
	}
	gaveUp := func(r logRecord) bool { return r.Level >= slog.LevelWarn && strings.Contains(r.Msg, "start offset") }
	wait.Within(t, 30*time.Second, "a log line saying the start offset lookup gave up", func() bool {
		return len(book.find(gaveUp)) > 0
	})
	return h
}

// releaseAndWait lets the held listings go and waits for every record to
// be delivered.
func (h *hungLookup) releaseAndWait(t *testing.T) {
	t.Helper()
	h.release()
	wait.Within(t, 30*time.Second, "every record once the cluster answers", func() bool { return h.l.covers(h.ends) })
}

// holdRequests makes c hold the requests of key that match accepts (only
// the first limit of them when limit > 0: the others go through) until
// the returned release is called or the test ends; held receives a value
// when one is held. match runs on the cluster's loop, one request at a
// time. The test must have registered c's Close before (newCluster does),
// so that the held requests let go before the cluster closes.
func holdRequests(t testing.TB, c *kfake.Cluster, key kmsg.Key, limit int32, match func(kmsg.Request) bool) (held <-chan struct{}, release func()) {
	t.Helper()
	heldCh := make(chan struct{}, 1)
	let := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(let) }) }
	var asleep atomic.Int32 // the requests held
	var matched int32
	t.Cleanup(func() {
		release()
		wait.Within(t, 20*time.Second, "the held requests let go", func() bool { return asleep.Load() == 0 })
	})
	c.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !match(req) {
			return nil, nil, false
		}
		if matched++; limit > 0 && matched > limit {
			return nil, nil, false
		}
		select {
		case heldCh <- struct{}{}:
		default:
		}
		select {
		case <-let:
		default:
			asleep.Add(1)
			c.SleepControl(func() { <-let })
			asleep.Add(-1)
		}
		return nil, nil, false
	})
	return heldCh, release
}

// joinWhileHeld starts a member of a's group (b's options) once a member
// of a's options, whose handler calls extra as pipelineOpts does, is ready
// (ready returns), and fails the test unless the rebalance gives b a
// partition within limit: a must let its partitions go by then, whatever
// request the cluster holds. It then calls release and checks that the
// members handle every record below ends. The group's session and
// rebalance timeouts are long (45s, 1m), so that neither ends a's part in
// the rebalance first.
func joinWhileHeld(t *testing.T, cl client, a, b kafka.Options, ends map[int32]int64, extra func(*message.Message[[]byte]) error,
	ready func(l *ledger), release func(), limit time.Duration) {
	t.Helper()
	var la, lb assignLog
	a.Telemetry, b.Telemetry = la.hooks(), lb.hooks()
	for _, o := range []*kafka.Options{&a, &b} {
		cfg := *o.Config
		cfg.Consumer.Group.Session.Timeout = 45 * time.Second
		cfg.Consumer.Group.Rebalance.Timeout = time.Minute
		o.Config = &cfg
	}
	l := newLedger()
	pa := startPipeline(t, pipelineOpts("a", cl.new(t, a), 1, l, extra))
	defer stopPipeline(t, pa)
	ready(l)
	start := time.Now()
	pb := startPipeline(t, pipelineOpts("b", cl.new(t, b), 1, l, nil))
	defer stopPipeline(t, pb)
	wait.Within(t, limit, "the joining member to claim a partition (the held request holds the rebalance)",
		func() bool { return len(lb.held()) > 0 })
	t.Logf("the joining member claimed a partition after %v", time.Since(start).Round(time.Millisecond))
	release()
	wait.Within(t, 20*time.Second, "every record handled", func() bool { return l.covers(ends) })
}

// Guarantee: a partition revoked while the cluster leaves its final commit
// unanswered lets go once RevokeTimeout has passed: the commit is
// abandoned, so the rebalance completes and the joining member claims its
// partitions, instead of waiting for the client's read timeout (sarama's
// Net.ReadTimeout, 30s, for each of Offsets.Retry.Max+1 attempts;
// franz-go's request timeout, here as long, for the heartbeat a commit on
// the same connection would hold).
func TestRevokeDoesNotWaitForAnUnansweredFinalCommit(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		cl = cl.withKgo(kgo.RequestTimeoutOverhead(30 * time.Second))
		c := newCluster(t, 2)
		ends := produce(t, c, 2, 0, 20)
		group := "g-unanswered-final-commit"
		a, b := sourceOptions(c, group), sourceOptions(c, group)
		a.CommitInterval, b.CommitInterval = time.Hour, time.Hour // no commit but the final ones
		held, release := holdRequests(t, c, kmsg.OffsetCommit, 0, func(kmsg.Request) bool { return true })
		joinWhileHeld(t, cl, a, b, ends, nil, func(l *ledger) {
			// The records handled give the final commits offsets to send.
			wait.Within(t, 20*time.Second, "every record handled", func() bool { return l.covers(ends) })
		}, release, a.RevokeTimeout+testbroker.HungGrace)
		select {
		case <-held:
		default:
			t.Fatal("no final commit was held: the rebalance did not wait for one")
		}
	})
}

// Guarantee: a partition revoked while it opens the consumer that
// redelivers a failed message (sarama's ConsumePartition, which lists the
// partition's offsets) and the cluster leaves that listing unanswered
// lets go as its session ends: the rebalance completes and the joining
// member claims its partitions, instead of waiting for Net.ReadTimeout
// (30s, twice per listing). The failed message is delivered again.
func TestRevokeDoesNotWaitForAnUnansweredRedeliveryLookup(t *testing.T) {
	for _, cl := range []client{saramaClient} { // franz-go moves its own fetch position instead
		c := newCluster(t, 2)
		ends := produce(t, c, 2, 0, 20)
		group := "g-unanswered-redelivery"
		a, b := sourceOptions(c, group), sourceOptions(c, group)
		a.FailurePolicy = kafka.FailureRedeliver
		var armed atomic.Bool // set as the message fails: the next listing of the end offset is held
		held, release := holdRequests(t, c, kmsg.ListOffsets, 1, func(req kmsg.Request) bool {
			return armed.Load() && slices.ContainsFunc(req.(*kmsg.ListOffsetsRequest).Topics, func(rt kmsg.ListOffsetsRequestTopic) bool {
				return slices.ContainsFunc(rt.Partitions, func(rp kmsg.ListOffsetsRequestTopicPartition) bool { return rp.Timestamp == -1 })
			})
		})
		var failed atomic.Bool
		joinWhileHeld(t, cl, a, b, ends, func(m *message.Message[[]byte]) error {
			if md, _ := message.MetadataAs[*kafka.Metadata](m); md.Partition == 0 && md.Offset == 5 && failed.CompareAndSwap(false, true) {
				armed.Store(true)
				return errors.New("fails once")
			}
			return nil
		}, func(*ledger) {
			select {
			case <-held:
			case <-time.After(30 * time.Second):
				t.Fatal("the redelivery never listed the partition's offsets")
			}
		}, release, testbroker.HungGrace)
	}
}

// Guarantee: a commit the member gave up on (the cluster left it
// unanswered past RevokeTimeout) is not overtaken by a later commit of the
// member: the later one waits for its answer on the same connection, so
// the broker never applies the older offset after the newer one, which
// would move the group's offset back below what the member records as
// committed (and, with nothing left to commit, never sends again). Once
// the held commit is answered, the handled offsets are committed.
func TestAbandonedCommitIsNotOvertakenByALaterOne(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const stuck = 10
		group := "g-abandoned-commit-order"
		c := newCluster(t, 1)
		// Records 0 to 9 first: the commit of 10 then covers them all,
		// whichever chunks the processor took them in. Had 10 come in a
		// chunk with some of them, their outcomes would wait for its
		// handler, and the handled prefix would stay below 10.
		produce(t, c, 1, 0, stuck)
		held, release := holdRequests(t, c, kmsg.OffsetCommit, 1, func(req kmsg.Request) bool {
			r := req.(*kmsg.OffsetCommitRequest)
			return r.Group == group && slices.ContainsFunc(r.Topics, func(rt kmsg.OffsetCommitRequestTopic) bool {
				return slices.ContainsFunc(rt.Partitions, func(rp kmsg.OffsetCommitRequestTopicPartition) bool { return rp.Offset == stuck })
			})
		})
		gate := make(chan struct{})
		open := sync.OnceFunc(func() { close(gate) })
		defer open()
		src := cl.new(t, sourceOptions(c, group))
		l := newLedger()
		p := startPipeline(t, pipelineOpts("abandoned", src, 1, l, func(m *message.Message[[]byte]) error {
			if md, _ := message.MetadataAs[*kafka.Metadata](m); md.Offset == stuck {
				<-gate // the handled prefix stays at 10 until the commit of 10 was given up
			}
			return nil
		}))
		defer stopPipeline(t, p)
		select {
		case <-held:
		case <-time.After(30 * time.Second):
			t.Fatal("no commit of offset 10 was held")
		}
		ends := map[int32]int64{0: 20}
		produce(t, c, 1, stuck, 20-stuck)
		wait.Within(t, 20*time.Second, "the held commit to be given up", func() bool { return onlyMember(t, src).CommitErrors > 0 })
		open()
		wait.Within(t, 20*time.Second, "every record handled", func() bool { return l.covers(ends) })
		gaveUp := onlyMember(t, src).CommitErrors
		wait.Within(t, 20*time.Second, "a commit of the handled offsets to be accepted or given up", func() bool {
			return committed(c, group)[0] == ends[0] || onlyMember(t, src).CommitErrors > gaveUp
		})
		if got := committed(c, group)[0]; got == ends[0] {
			t.Fatalf("the broker accepted offset %d while the member's commit of %d was still unanswered: applied later, that one moves the group's offset back", got, stuck)
		}
		release()
		wait.Within(t, 20*time.Second, "the handled offsets committed once the held commit was answered", func() bool {
			return equalOffsets(committed(c, group), ends)
		})
		stopPipeline(t, p)
		if got := committed(c, group); !equalOffsets(got, ends) {
			t.Fatalf("committed after the stop = %v, want %v", got, ends)
		}
	})
}

// Guarantee: a commit the member gave up on, which keeps the member's
// commit connection until it is answered, does not hold the member's Close:
// once every partition made its final commit, Close ends it, and Stop
// returns after the final commits' RevokeTimeout rather than after the
// client's read timeout (30s) or Stop's own deadline.
func TestStopDoesNotWaitForAnAbandonedCommit(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		group := "g-stop-abandoned-commit"
		c := newCluster(t, 1)
		ends := produce(t, c, 1, 0, 20)
		held, _ := holdRequests(t, c, kmsg.OffsetCommit, 0, func(req kmsg.Request) bool {
			return req.(*kmsg.OffsetCommitRequest).Group == group
		})
		o := sourceOptions(c, group)
		src := cl.new(t, o)
		l := newLedger()
		p := startHeld(t, pipelineOpts("stop-abandoned", src, 1, l, nil), held, "no commit was held")
		wait.Within(t, 20*time.Second, "every record handled and a commit given up", func() bool {
			return l.covers(ends) && onlyMember(t, src).CommitErrors > 0
		})
		stopsWithin(t, p, o.RevokeTimeout+testbroker.HungGrace, "a commit unanswered")
	})
}

// startHeld starts a pipeline of po, which waits a minute for its drain
// and its source's Close (the test measures the stop itself), and waits
// for held: it stops the pipeline and fails t, saying never, unless the
// cluster holds a request of the member within 30s.
func startHeld(t *testing.T, po pipeline.Options[[]byte, []byte], held <-chan struct{}, never string) *pipeline.Pipeline[[]byte, []byte] {
	t.Helper()
	po.ShutdownTimeout = time.Minute
	p := startPipeline(t, po)
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		stopPipeline(t, p)
		t.Fatal(never)
	}
	return p
}

// stopsWithin stops p with a minute's deadline and fails t unless Stop
// returns nil within d, with what (unanswered) holding the cluster.
func stopsWithin[In, Out any](t *testing.T, p *pipeline.Pipeline[In, Out], d time.Duration, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- p.Stop(ctx) }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Stop = %v, want nil", err)
		}
	case <-time.After(d):
		t.Errorf("Stop still waits %v after it was called, with %s", d, what)
		cancel()
		<-stopped
	}
}

// Guarantee: a run whose client is still connecting when the pipeline
// stops (the cluster answered the connection check, then leaves the
// client's metadata request unanswered) returns when its context ends: the
// pipeline's Stop returns within its own deadline instead of waiting for
// the client's metadata timeout (Config.Metadata.Timeout, 10s).
func TestARunStillConnectingEndsWithItsContext(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		c := newCluster(t, 2)
		held, _ := holdRequests(t, c, kmsg.Metadata, 0, func(kmsg.Request) bool { return true })
		p := startPipeline(t, pipelineOpts("connecting", cl.new(t, sourceOptions(c, "g-connecting")), 1, newLedger(), nil))
		select {
		case <-held:
		case <-time.After(20 * time.Second):
			t.Fatal("the client asked for no metadata within 20s")
		}
		const limit = 3 * time.Second
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		defer cancel()
		start := time.Now()
		if err := p.Stop(ctx); err != nil {
			t.Fatalf("Stop while the client waits for its metadata: %v after %v, want nil within %v", err, time.Since(start).Round(time.Millisecond), limit)
		}
	})
}
