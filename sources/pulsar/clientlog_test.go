package pulsar_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/wait"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// The client's texts, as pulsar-client-go v0.21.0 logs them.
const (
	failedConnect   = "Failed to connect to broker."
	failedLookup    = "Failed to lookup topic"
	failedReconnect = "Failed to create consumer at reconnect"
)

// clientLines returns a client logger writing text at level to the Lines
// it returns.
func clientLines(level slog.Level) (plog.Logger, *logtest.Lines) {
	lines := new(logtest.Lines)
	return bpulsar.ClientLogger(slog.New(slog.NewTextHandler(lines, &slog.HandlerOptions{Level: level}))), lines
}

// brokerAddr is the broker address a connection's logger names, as the
// client gives it (a *url.URL).
func brokerAddr(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// consumerLog is the logger the client gives a partition consumer.
func consumerLog(l plog.Logger, id uint64) plog.Logger {
	return l.SubLogger(plog.Fields{"name": "bebuu", "topic": "persistent://public/default/orders", "subscription": "billing", "consumerID": id})
}

// Guarantee: a broker out of reach for 10 s, which the client fails to
// connect to 9 times a second and a consumer of which fails to reconnect
// once a second, costs one WARN line for the connections and one per
// failure text of the consumer, whatever their count; the client's next
// connection to that broker, and the consumer's reconnection, end them
// with one INFO line each counting the failures.
func TestAnOutageIsOneLinePerFailureThenOneINFOLineWithTheCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, lines := clientLines(slog.LevelInfo)
		addr := brokerAddr(t, "pulsar://127.0.0.1:6650")
		refused := errors.New("dial tcp 127.0.0.1:6650: connect: connection refused")
		cons := consumerLog(l, 3)
		for i := range 90 { // 9 a second for 10 s
			conn := l.SubLogger(plog.Fields{"remote_addr": addr})
			conn.Info("Connecting to broker")
			conn.WithError(refused).Warn(failedConnect)
			if i%9 == 0 {
				cons.WithError(errors.New("context deadline exceeded\nconnection error")).Warn(failedLookup)
				cons.WithError(errors.New("context deadline exceeded\nconnection error")).Error(failedReconnect)
				cons.WithFields(plog.Fields{"delayReconnectTime": time.Second}).Info("Reconnecting to broker")
			}
			time.Sleep(time.Second / 9)
		}
		if got := lines.All(); len(got) != 3 {
			t.Fatalf("a 10 s outage logged %d lines, want 3 (one per failure):\n%s", len(got), strings.Join(got, ""))
		}
		lines.Want(t, 1, "WARN lines for the failed connections", "level=WARN", `msg="`+failedConnect+`"`, "remote_addr=pulsar://127.0.0.1:6650", "connection refused")
		lines.Want(t, 1, "WARN lines for the consumer's lookups", "level=WARN", `msg="`+failedLookup+`"`, "consumerID=3", "subscription=billing")
		lines.Want(t, 1, "ERROR lines for the consumer's reconnections", "level=ERROR", `msg="`+failedReconnect+`"`, "consumerID=3")
		conn := l.SubLogger(plog.Fields{"remote_addr": addr}).SubLogger(plog.Fields{"local_addr": "127.0.0.1:50000"})
		conn.Info("TCP connection established")
		conn.Info("Connection is ready")
		lines.Want(t, 1, "INFO lines ending the failed connections", "level=INFO", `msg="`+failedConnect+` (ended)"`, "remote_addr=pulsar://127.0.0.1:6650", "failures=90")
		cons.Info("Connected consumer")
		cons.Info("Reconnected consumer to broker")
		lines.Want(t, 1, "INFO lines ending the lookups", "level=INFO", `msg="`+failedLookup+` (ended)"`, "consumerID=3", "failures=10")
		lines.Want(t, 1, "INFO lines ending the reconnections", "level=INFO", `msg="`+failedReconnect+` (ended)"`, "consumerID=3", "failures=10")
		if got := lines.All(); len(got) != 6 {
			t.Fatalf("the outage and its end logged %d lines, want 6:\n%s", len(got), strings.Join(got, ""))
		}
	})
}

// Guarantee: a broker that refuses the client's handshake at each of its
// retries, whatever its message, costs one WARN line keeping the broker's
// message; the client's next connection to that broker ends the run with
// one INFO line counting the refusals.
func TestARefusedHandshakeRetriedIsOneLineThenOneINFOLineWithTheCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, lines := clientLines(slog.LevelInfo)
		addr := brokerAddr(t, "pulsar://127.0.0.1:6650")
		for i := range 30 {
			why := "Failed to authenticate"
			if i%2 == 1 {
				why = "Unable to authenticate: token expired"
			}
			conn := l.SubLogger(plog.Fields{"remote_addr": addr}).SubLogger(plog.Fields{"local_addr": fmt.Sprintf("127.0.0.1:%d", 50000+i)})
			conn.Info("TCP connection established")
			conn.Warnf("Failed to establish connection with broker: '%s'", why)
			time.Sleep(time.Second / 9)
		}
		if got := lines.All(); len(got) != 1 {
			t.Fatalf("30 refused handshakes logged %d lines, want 1:\n%s", len(got), strings.Join(got, ""))
		}
		lines.Want(t, 1, "WARN lines for the refused handshakes", "level=WARN", `msg="Failed to establish connection with broker: 'Failed to authenticate'"`, "remote_addr=pulsar://127.0.0.1:6650")
		conn := l.SubLogger(plog.Fields{"remote_addr": addr}).SubLogger(plog.Fields{"local_addr": "127.0.0.1:51000"})
		conn.Info("Connection is ready")
		lines.Want(t, 1, "INFO lines ending the refused handshakes", "level=INFO", `msg="Failed to establish connection with broker: 'Failed to authenticate' (ended)"`, "remote_addr=pulsar://127.0.0.1:6650", "failures=30")
		if got := lines.All(); len(got) != 2 {
			t.Fatalf("the refusals and their end logged %d lines, want 2:\n%s", len(got), strings.Join(got, ""))
		}
	})
}

// Guarantee: a failure that goes on is logged again after a minute with
// " (still)", when it began and its count so far; each broker address and
// each consumer is a run of its own, ended only by its own success.
func TestAFailureThatGoesOnIsLoggedAgainAndEachBrokerAndConsumerOnItsOwn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, lines := clientLines(slog.LevelInfo)
		a, b := brokerAddr(t, "pulsar://10.0.0.1:6650"), brokerAddr(t, "pulsar://10.0.0.2:6650")
		refused := errors.New("connection refused")
		began := time.Now()
		for range 61 { // one a second for a minute, and one
			l.SubLogger(plog.Fields{"remote_addr": a}).WithError(refused).Warn(failedConnect)
			l.SubLogger(plog.Fields{"remote_addr": b}).WithError(refused).Warn(failedConnect)
			consumerLog(l, 1).WithError(refused).Error(failedReconnect)
			consumerLog(l, 2).WithError(refused).Error(failedReconnect)
			time.Sleep(time.Second)
		}
		since := "since=" + began.Format("2006-01-02T15:04:05.000Z07:00")
		lines.Want(t, 2, "first lines of the failed connections (one per broker)", "level=WARN", `msg="`+failedConnect+`"`)
		lines.Want(t, 2, "repeats of the failed connections", "level=WARN", `msg="`+failedConnect+` (still)"`, since, "failures=61")
		lines.Want(t, 2, "first lines of the reconnections (one per consumer)", "level=ERROR", `msg="`+failedReconnect+`"`)
		lines.Want(t, 2, "repeats of the reconnections", "level=ERROR", `msg="`+failedReconnect+` (still)"`, "failures=61")
		l.SubLogger(plog.Fields{"remote_addr": a}).Info("Connection is ready")
		consumerLog(l, 2).Info("Reconnected consumer to broker")
		lines.Want(t, 1, "end lines", "level=INFO", "(ended)", "remote_addr=pulsar://10.0.0.1:6650", "failures=61")
		lines.Want(t, 1, "end lines", "level=INFO", "(ended)", "consumerID=2", "failures=61")
		lines.Want(t, 2, "end lines in all", "level=INFO", "(ended)")
	})
}

// Guarantee: an outage of an hour costs a consumer a handful of lines
// even once the client's backoff between its reconnection attempts has
// grown to a minute and more (pulsar-client-go: from 100 ms, doubling, up
// to 60 s plus a fifth of jitter): the attempts are one run, logged when it
// begins and at growing intervals, not a new run per attempt. The lookup
// service's own failed lookups of the topic, which name no consumer, are a
// run of their own, ended by the consumer's reconnection.
func TestAnHourLongOutageWithTheClientsBackoffIsAFewLines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, lines := clientLines(slog.LevelInfo)
		cons := consumerLog(l, 7)
		lookups := l.SubLogger(plog.Fields{"serviceURL": "pulsar://10.0.0.1:6650", "topic": "persistent://public/default/orders"})
		refused := errors.New("connection refused")
		failures := 0
		for wait, spent := 100*time.Millisecond, time.Duration(0); spent < time.Hour; spent += wait {
			lookups.WithError(refused).Warn(failedLookup)
			cons.WithError(refused).Warn(failedLookup)
			cons.WithError(refused).Error(failedReconnect)
			failures++
			time.Sleep(wait)
			wait = min(2*wait, 72*time.Second) // the longest: 60 s and a fifth
		}
		if got := lines.All(); len(got) > 3*8 {
			t.Fatalf("an hour of %d failed reconnections logged %d lines, want at most 8 for each of the 3 runs:\n%s",
				failures, len(got), strings.Join(got, ""))
		}
		lines.Want(t, 1, "first lines of the consumer's failed reconnections", "level=ERROR", `msg="`+failedReconnect+`"`)
		lines.Want(t, 1, "first lines of the lookup service's failed lookups", "level=WARN", `msg="`+failedLookup+`"`, "serviceURL=")
		cons.Info("Reconnected consumer to broker")
		lines.Want(t, 1, "end lines of the consumer's runs", "level=INFO", "(ended)", "consumerID=7", fmt.Sprintf("failures=%d", failures), failedReconnect)
		lines.Want(t, 1, "end lines of the lookup service's run", "level=INFO", "(ended)", "serviceURL=", fmt.Sprintf("failures=%d", failures))
	})
}

// Guarantee: what the client logs at WARN or ERROR for events that lose
// nothing is logged at Debug: messages dropped on receipt as delivered or
// acknowledged already after a reconnection, and a consumer closed before
// the client sent it permits or a redelivery request. A warning of
// another kind keeps its level.
func TestClientLinesOfEventsThatLoseNothingAreDebug(t *testing.T) {
	l, lines := clientLines(slog.LevelDebug)
	cons := consumerLog(l, 5)
	for range 165 {
		cons.Warnf("receive %d messages , all filtered", 1)
	}
	cons.Warnf("receive %d messages , all filtered", 10)
	cons.WithField("state", "Closing").Error("Failed to redeliver closing or closed consumer")
	cons.WithError(errors.New("consumer closing or closed")).Error("unable to send initial permits to broker")
	cons.WithError(errors.New("connection closed")).Warn("Failed to close consumer")
	lines.Want(t, 166, "DEBUG lines for messages filtered on receipt", "level=DEBUG", "all filtered", "consumerID=5")
	lines.Want(t, 1, "DEBUG lines for the closing consumer", "level=DEBUG", `msg="Failed to redeliver closing or closed consumer"`, "state=Closing")
	lines.Want(t, 1, "DEBUG lines for the permits of the closing consumer", "level=DEBUG", `msg="unable to send initial permits to broker"`)
	lines.Want(t, 1, "WARN lines for the consumer's failed close", "level=WARN", `msg="Failed to close consumer"`)
	if n := lines.Count("level=WARN") + lines.Count("level=ERROR"); n != 1 {
		t.Errorf("%d WARN or ERROR lines, want 1 (the failed close):\n%s", n, strings.Join(lines.All(), ""))
	}
}

// Guarantee: permits the client fails to send to a consumer that is
// not closing (a lost connection) keep the client's level: the consumer
// may be left without permits, which is no event that loses nothing.
func TestPermitsNotSentToAnOpenConsumerKeepTheirLevel(t *testing.T) {
	l, lines := clientLines(slog.LevelDebug)
	cons := consumerLog(l, 6)
	cons.WithError(errors.New("connection closed")).Error("unable to send permits")
	cons.WithError(errors.New("connection closed")).Error("unable to send initial permits to broker")
	lines.Want(t, 1, "ERROR lines for the permits not sent", "level=ERROR", `msg="unable to send permits"`, "connection closed")
	lines.Want(t, 1, "ERROR lines for the initial permits not sent", "level=ERROR", `msg="unable to send initial permits to broker"`, "connection closed")
}

// counter returns the value of the counter name in reg, or 0.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// Guarantee: a broker that goes away while a client holds consumers on it,
// and comes back after the client failed to connect to it many times,
// costs a bounded number of WARN and ERROR lines from the client, none
// repeated: one for the failed connections and at most one per failure
// text of each consumer; the connection that succeeds again ends them
// with one INFO line counting the failures.
func TestABrokerGoneForAWhileCostsABoundedNumberOfClientLines(t *testing.T) {
	const consumers = 3
	e := newEnv(t)
	recs := newRecords()
	reg := prometheus.NewRegistry()
	client, err := bpulsar.NewClient(pulsar.ClientOptions{URL: e.broker.URL(), OperationTimeout: time.Second, MetricsRegisterer: reg}, slog.New(recs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	for i := range consumers {
		c, err := client.Subscribe(pulsar.ConsumerOptions{Topic: fmt.Sprintf("gone-%d", i), SubscriptionName: "sub"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
	}
	// The consumers' first permits reach the broker before it goes: a
	// connection closed under them fails their sending once, logged.
	wait.Within(t, waitLimit, "every consumer's first permits", func() bool {
		for i := range consumers {
			st := e.broker.Consumers(fmt.Sprintf("gone-%d", i), "sub")
			if len(st) != 1 || st[0].PermitsGranted == 0 {
				return false
			}
		}
		return true
	})
	addr := e.broker.Addr().String()
	if err := e.broker.Close(); err != nil {
		t.Fatal(err)
	}
	const failures = 30
	wait.Within(t, waitLimit, fmt.Sprintf("%d failed connections", failures), func() bool {
		return counter(t, reg, "pulsar_client_connections_establishment_errors") >= failures
	})
	b, err := pulsartest.Start(context.Background(), pulsartest.Options{Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	wait.Within(t, waitLimit, "every consumer reconnected", func() bool {
		for i := range consumers {
			if len(b.Consumers(fmt.Sprintf("gone-%d", i), "sub")) != 1 {
				return false
			}
		}
		return true
	})
	seen := map[string]bool{}
	var all, bad []string
	for _, l := range recs.snapshot() {
		if l.level < slog.LevelWarn {
			continue
		}
		all = append(all, l.text)
		what := l.level.String() + " " + l.msg
		for _, a := range l.attrs {
			if a.Key == "remote_addr" || a.Key == "consumerID" {
				what += " " + a.Key + "=" + a.Value.String()
			}
		}
		if seen[what] {
			bad = append(bad, "repeated: "+l.text)
		}
		seen[what] = true
	}
	if len(all) > 1+2*consumers || len(bad) > 0 {
		t.Errorf("%d WARN and ERROR lines, want at most %d, none repeated:\n%s%s", len(all), 1+2*consumers, strings.Join(all, ""), strings.Join(bad, ""))
	}
	// The client says its connection is ready before it subscribes on it.
	if end, ok := recs.first(slog.LevelInfo, failedConnect+" (ended)"); !ok {
		t.Errorf("no INFO line ends the failed connections")
	} else if !strings.Contains(end.text, "remote_addr=pulsar://"+addr) || strings.Contains(end.text, "failures=1 ") {
		t.Errorf("the failed connections ended with %q, want their broker and a count of several failures", end.text)
	}
}

// BenchmarkClientFailureHeldBack is what a failed connection the client
// logs costs once its run was logged and no repeat is due, the client's
// own call to attach the error included: counted, not logged.
func BenchmarkClientFailureHeldBack(b *testing.B) {
	l := bpulsar.ClientLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	u, _ := url.Parse("pulsar://127.0.0.1:6650")
	conn := l.SubLogger(plog.Fields{"remote_addr": u})
	refused := errors.New("dial tcp 127.0.0.1:6650: connect: connection refused")
	b.ReportAllocs()
	for b.Loop() {
		conn.WithError(refused).Warn(failedConnect)
	}
}

// BenchmarkClientInfoLine is what one of the client's Info lines costs
// while no run of failures goes on (it is logged at Debug, not enabled).
func BenchmarkClientInfoLine(b *testing.B) {
	l := bpulsar.ClientLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	cons := consumerLog(l, 1)
	b.ReportAllocs()
	for b.Loop() {
		cons.Info("Reconnected consumer to broker")
	}
}

// Guarantee: the client's line for a consumer the broker closed is one
// INFO line naming the consumer's topic and subscription as well as the
// broker, logged when the consumer says its connection closed; one about
// a consumer the connection does not know is one INFO line still, with
// the broker's address; a consumer whose connection closed on its own
// gets no INFO line.
func TestABrokerClosedConsumerIsOneINFOLineNamingItsTopicAndSubscription(t *testing.T) {
	l, lines := clientLines(slog.LevelInfo)
	conn := l.SubLogger(plog.Fields{"remote_addr": brokerAddr(t, "pulsar://10.0.0.7:6650")})
	conn.Infof("Broker notification of Closed consumer: %d", 5)
	consumerLog(l, 5).Debug("connection closed and send to connectClosedCh")
	conn.Infof("Broker notification of Closed consumer: %d", 9)
	conn.WithField("consumerID", uint64(9)).Warnf("Consumer with ID not found while closing consumer")
	consumerLog(l, 6).Debug("connection closed and send to connectClosedCh")
	lines.Want(t, 2, "INFO lines for consumers the broker closed", "level=INFO", "Broker notification of Closed consumer")
	lines.Want(t, 1, "INFO lines for consumer 5 naming its topic, subscription and broker", "level=INFO",
		"Broker notification of Closed consumer: 5", "topic=persistent://public/default/orders ", "subscription=billing ",
		"remote_addr=pulsar://10.0.0.7:6650")
	lines.Want(t, 1, "INFO lines for the unknown consumer 9 naming the broker", "level=INFO",
		"Broker notification of Closed consumer: 9", "remote_addr=pulsar://10.0.0.7:6650")
	if n := lines.Count("level=INFO"); n != 2 {
		t.Errorf("%d INFO lines, want 2:\n%s", n, strings.Join(lines.All(), ""))
	}
}

// Guarantee: a line saying the broker closed a consumer, held for the
// consumer's own line that follows it, is logged as it came (at INFO,
// naming the broker) when that line has not come within a second, at the
// client's next line, or when more than 64 such lines wait for theirs:
// none is lost for want of its consumer's line.
func TestABrokerClosedConsumerLineIsLoggedWhenItsConsumersLineDoesNotFollow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, lines := clientLines(slog.LevelInfo)
		conn := l.SubLogger(plog.Fields{"remote_addr": brokerAddr(t, "pulsar://10.0.0.7:6650")})
		conn.Infof("Broker notification of Closed consumer: %d", 5)
		time.Sleep(time.Second)
		consumerLog(l, 6).Debug("Hello from consumer 6")
		lines.Want(t, 1, "INFO lines for consumer 5 naming the broker", "level=INFO",
			"Broker notification of Closed consumer: 5", "remote_addr=pulsar://10.0.0.7:6650")
		for id := range 65 {
			conn.Infof("Broker notification of Closed consumer: %d", 100+id)
		}
		lines.Want(t, 1, "INFO lines for the first of 65 consumers", "level=INFO",
			"Broker notification of Closed consumer: 100\"")
		if n := lines.Count("level=INFO", "Broker notification of Closed consumer"); n != 2 {
			t.Errorf("%d INFO lines for consumers the broker closed, want 2:\n%s", n, strings.Join(lines.All(), ""))
		}
	})
}
