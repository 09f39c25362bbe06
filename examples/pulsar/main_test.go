package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/examples/internal/exampletest"
	"github.com/boulevard-go/boulevard/internal/testnet"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// Every test must leave no goroutine of the pipeline, client or broker
// behind. A test binary started by exampletest.Start runs main instead.
func TestMain(m *testing.M) {
	exampletest.RunMain(main)
	goleak.VerifyTestMain(m)
}

// On the in-process broker every published event is handled, the failed
// ones come back once through nack redelivery, the batches add up to every
// event per customer, and each consumer granted the broker 100 permits when
// it subscribed. (Later grants are 50, plus the permits pulsar-client-go
// returns at once for the already-acked messages of a redelivered batch.)
func TestRunInProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	cfg := config{topic: "example-test", subscription: "s", n: 2000, customers: 4, concurrency: 2,
		nackDelay: 300 * time.Millisecond, logger: slog.New(slog.DiscardHandler)}
	res, err := run(ctx, cfg, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if res.handled != 2000 {
		t.Errorf("handled %d events, want 2000", res.handled)
	}
	if res.failed != 8 || res.redelivered < 8 || res.cameBack != 8 {
		t.Errorf("%d failures, %d redeliveries, %d came back; want 8 failures (every 250th) each redelivered and handled", res.failed, res.redelivered, res.cameBack)
	}
	sum := 0
	for k, v := range res.totals {
		if v != 500 {
			t.Errorf("%s: %d events batched, want 500", k, v)
		}
		sum += v
	}
	if sum != 2000 || len(res.totals) != 4 {
		t.Errorf("batches total %d over %d customers, want 2000 over 4", sum, len(res.totals))
	}
	if len(res.flows) != 2 {
		t.Fatalf("want 2 consumers at the broker, got %d", len(res.flows))
	}
	for i, f := range res.flows {
		// The default window's receiver queue is 49 (half of it, at most
		// the part above Threshold less one), refilled half at a time
		// (docs/pulsar.md, Flow control).
		if len(f) < 2 || f[0] != 49 || f[1] != 24 {
			t.Errorf("consumer %d grants %v, want 49 then 24", i, f)
		}
	}
	if !strings.Contains(out.String(), "handled 2000 events") || !strings.Contains(out.String(), "8 failed once, 8 came back") {
		t.Errorf("report does not say what was handled:\n%s", out.String())
	}
}

// Given a URL with a password in its user information, the program never
// prints it: not in its output, not in its debug log (pulsar-client-go's
// lines included), not in the error run returns.
func TestURLPasswordNeverPrinted(t *testing.T) {
	addr := testnet.ClosedPort(t) // the run fails after trying
	var out, logs bytes.Buffer
	cfg := config{url: "pulsar://alice:pw-5e4d3c@" + addr, topic: "t", subscription: "s", n: 1, customers: 1, concurrency: 1,
		nackDelay: time.Second, logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := run(ctx, cfg, &out)
	if err == nil {
		t.Fatal("a run against nothing listening succeeded")
	}
	for what, s := range map[string]string{"output": out.String(), "log": logs.String(), "error": err.Error()} {
		if strings.Contains(s, "pw-5e4d3c") {
			t.Errorf("the %s shows the password:\n%s", what, s)
		}
	}
	if !strings.Contains(logs.String(), "alice:xxxxx@"+addr) {
		t.Errorf("the debug log never names the (redacted) broker URL:\n%s", logs.String())
	}
}

// Flags out of range make the run fail at once with an error naming the
// flag: no panic (-customers 0 divided by zero), no wait for events that
// were never published (-n 0 or less waited forever), no memory reserved
// for more events than the run can remember; -n 0 is a run that handles
// nothing and returns.
func TestBadFlagsFailFastAndZeroEventsReturns(t *testing.T) {
	for _, tc := range []struct {
		name      string
		n, custs  int
		wantError string
	}{
		{"customers 0", 10, 0, "-customers"},
		{"n negative", -1, 1, "-n"},
		{"n above its bound", maxEvents + 1, 1, "-n"},
		{"n 0", 0, 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cfg := config{topic: "t", subscription: "s", n: tc.n, customers: tc.custs, concurrency: 1,
				nackDelay: time.Second, logger: slog.New(slog.DiscardHandler)}
			done := make(chan error, 1)
			go func() {
				defer func() {
					if r := recover(); r != nil {
						done <- fmt.Errorf("panic: %v", r)
					}
				}()
				_, err := run(ctx, cfg, io.Discard)
				done <- err
			}()
			select {
			case err := <-done:
				if tc.wantError == "" && err != nil {
					t.Fatalf("run: %v", err)
				}
				if tc.wantError != "" && (err == nil || !strings.Contains(err.Error(), tc.wantError) || strings.HasPrefix(err.Error(), "panic")) {
					t.Fatalf("run returned %v, want an error naming %s", err, tc.wantError)
				}
			case <-time.After(15 * time.Second):
				cancel()
				<-done
				t.Fatal("run still waiting after 15s")
			}
		})
	}
}

// An interrupted publish (Ctrl-C cancels the run's context) stops sending
// and returns how many events the broker acknowledged, instead of going on
// through every event of a large -n.
func TestPublishStopsWhenInterrupted(t *testing.T) {
	b, err := pulsartest.Start(context.Background(), pulsartest.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	client, err := bpulsar.NewClient(pulsar.ClientOptions{URL: b.URL()}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	type outcome struct {
		published int
		err       error
	}
	done := make(chan outcome, 1)
	go func() {
		n, err := publish(ctx, client, config{topic: "interrupted", n: maxEvents, customers: 5})
		done <- outcome{n, err}
	}()
	select {
	case o := <-done:
		if o.err != nil || o.published >= maxEvents {
			t.Fatalf("publish with its context cancelled = %d, %v; want fewer than %d events and no error", o.published, o.err, maxEvents)
		}
	case <-time.After(5 * time.Second):
		// Stopping takes one check; sending every event takes far longer.
		t.Fatal("publish still sending 5s after its context was cancelled")
	}
}

// Guarantee: Ctrl-C while the program publishes stops the publishing,
// says how many events were published, and exits 0 without an error line:
// the events already handed to the client are sent, not failed.
func TestSignalWhilePublishingReportsWhatWasPublished(t *testing.T) {
	p := exampletest.Start(t, "-n", strconv.Itoa(maxEvents))
	p.WaitOutput("in-process Pulsar broker at ", time.Minute)
	p.Signal(os.Interrupt)
	if code := p.Wait(time.Minute); code != 0 {
		t.Fatalf("exit status %d, want 0\nstderr:\n%s", code, p.Stderr())
	}
	if !strings.Contains(p.Stdout(), "\ninterrupted while publishing: published ") ||
		!strings.Contains(p.Stdout(), fmt.Sprintf(" of %d events to ", maxEvents)) {
		t.Fatalf("no report of the interrupted publishing:\n%s", p.Stdout())
	}
	if p.Stderr() != "" {
		t.Fatalf("stderr %q, want nothing: an interruption is not an error", p.Stderr())
	}
}

// Guarantee: -concurrency, -nack-delay and -subscription values the program
// cannot run with are refused at once with an error naming the flag: a
// negative -nack-delay made pulsar-client-go panic, and 0 meant its default
// of one minute per failed event.
func TestMoreBadFlagsNameTheFlag(t *testing.T) {
	valid := config{topic: "t", subscription: "s", n: 10, customers: 1, concurrency: 1, nackDelay: time.Second,
		logger: slog.New(slog.DiscardHandler)}
	for _, tc := range []struct {
		flag string
		set  func(*config)
	}{
		{"-concurrency", func(c *config) { c.concurrency = 0 }},
		{"-concurrency", func(c *config) { c.concurrency = -1 }},
		{"-concurrency", func(c *config) { c.concurrency = producer.MaxConcurrency + 1 }},
		{"-nack-delay", func(c *config) { c.nackDelay = -time.Second }},
		{"-nack-delay", func(c *config) { c.nackDelay = 0 }},
		{"-nack-delay", func(c *config) { c.nackDelay = maxNackDelay + 1 }},
		{"-subscription", func(c *config) { c.subscription = "" }},
	} {
		c := valid
		tc.set(&c)
		err := func() (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("panic: %v", r)
				}
			}()
			// A cancelled context: a run that is not refused stops at once.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, err = run(ctx, c, io.Discard)
			return err
		}()
		if err == nil || !strings.HasPrefix(err.Error(), tc.flag+" ") {
			t.Errorf("%s: run = %v, want an error naming %s", tc.flag, err, tc.flag)
		}
	}
}

// Guarantee: Ctrl-C and SIGTERM both stop the program the graceful way
// while it consumes: the pipeline drains, the report says how many events
// were left (and that none of the failed ones came back), and it exits 0.
func TestSignalsDrainAndReport(t *testing.T) {
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			// Every 250th event fails once and comes back only after
			// -nack-delay, far longer than the test waits.
			p := exampletest.Start(t, "-n", "1000", "-nack-delay", "1m")
			p.WaitOutput("published 1000 events", time.Minute)
			p.Signal(sig)
			if code := p.Wait(time.Minute); code != 0 {
				t.Fatalf("exit status %d, want 0\nstderr:\n%s", code, p.Stderr())
			}
			if !strings.Contains(p.Stdout(), "\ninterrupted: ") || !strings.Contains(p.Stdout(), " of 1000 events not handled") {
				t.Fatalf("no report of the interrupted run:\n%s", p.Stdout())
			}
			if !strings.Contains(p.Stdout(), " failed once, 0 came back ") {
				t.Fatalf("the report says failed events came back before their -nack-delay:\n%s", p.Stdout())
			}
		})
	}
}

// Guarantee: the error run returns never holds the user information of
// -url, so that any caller may print it as it is, not only main.
func TestRunErrorHoldsNoCredentials(t *testing.T) {
	addr := testnet.ClosedPort(t) // the run fails after trying
	// TestURLPasswordNeverPrinted covers a password RedactURL can
	// delimit; this one has a raw "/", which it cannot.
	for _, url := range []string{"pulsar://user:se/cret@" + addr} {
		cfg := config{url: url, topic: "t", subscription: "s", n: 1, customers: 1, concurrency: 1,
			nackDelay: time.Second, logger: slog.New(slog.DiscardHandler)}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		_, err := run(ctx, cfg, io.Discard)
		cancel()
		if err == nil {
			t.Fatalf("%s: a run against nothing listening succeeded", url)
		}
		if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "cret") {
			t.Errorf("run with -url %s returned an error that shows the credentials: %v", url, err)
		}
	}
}

// Guarantee: given a -url where no broker can be reached, the program
// exits 1 within the client's bounds with one line on stderr, naming the
// URL, although pulsar-client-go's errors may span several lines.
func TestUnreachableBrokerExitsWithOneLine(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens
	p := exampletest.Start(t, "-url", "pulsar://"+addr, "-n", "1")
	if code := p.Wait(time.Minute); code != 1 {
		t.Fatalf("exit status %d, want 1\nstderr:\n%s", code, p.Stderr())
	}
	stderr := strings.TrimSuffix(p.Stderr(), "\n")
	if strings.Contains(stderr, "\n") || !strings.Contains(stderr, addr) {
		t.Fatalf("stderr %q, want one line naming %s", p.Stderr(), addr)
	}
}
