package pulsar_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/testnet"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
)

// records is a slog handler that keeps every record it is given, with the
// attributes of its logger, rendered as text too.
type records struct {
	mu    *sync.Mutex
	all   *[]logged
	attrs []slog.Attr
}

type logged struct {
	at    time.Time
	level slog.Level
	msg   string
	attrs []slog.Attr
	text  string
}

func newRecords() *records { return &records{mu: new(sync.Mutex), all: new([]logged)} }

func (r *records) Enabled(context.Context, slog.Level) bool { return true }

func (r *records) Handle(_ context.Context, rec slog.Record) error {
	l := logged{at: time.Now(), level: rec.Level, msg: rec.Message, attrs: append([]slog.Attr(nil), r.attrs...)}
	rec.Attrs(func(a slog.Attr) bool {
		l.attrs = append(l.attrs, a)
		return true
	})
	var b strings.Builder
	th := slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelDebug})
	out := slog.NewRecord(rec.Time, rec.Level, rec.Message, 0)
	out.AddAttrs(l.attrs...)
	_ = th.Handle(context.Background(), out)
	l.text = b.String()
	r.mu.Lock()
	*r.all = append(*r.all, l)
	r.mu.Unlock()
	return nil
}

func (r *records) WithAttrs(as []slog.Attr) slog.Handler {
	c := *r
	c.attrs = append(append([]slog.Attr(nil), r.attrs...), as...)
	return &c
}

func (r *records) WithGroup(string) slog.Handler { return r }

func (r *records) snapshot() []logged {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]logged(nil), *r.all...)
}

// first returns the first record at level with message msg, if any.
func (r *records) first(level slog.Level, msg string) (logged, bool) {
	for _, l := range r.snapshot() {
		if l.level == level && l.msg == msg {
			return l, true
		}
	}
	return logged{}, false
}

// unreachable starts a pipeline whose source's client points at addr
// (with user information in its URL) and returns the log records.
func unreachable(t *testing.T, addr string) (*records, time.Time) {
	t.Helper()
	recs := newRecords()
	logger := slog.New(recs)
	client, err := bpulsar.NewClient(pulsar.ClientOptions{URL: "pulsar://alice:s3cret-pw@" + addr}, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	src := bpulsar.New(bpulsar.Options{Client: client, Topics: []string{"unreachable"}, Subscription: "sub"})
	began := time.Now()
	start(t, pipeline.Options[[]byte, []byte]{
		Name:            "unreachable",
		Logger:          logger,
		ShutdownTimeout: 10 * time.Second,
		Producer: producer.Options[[]byte]{Source: src,
			Restart: producer.Restart{MaxRestarts: 100, Window: time.Minute, Backoff: 10 * time.Millisecond, MaxBackoff: 10 * time.Millisecond}},
		Processors: processor.Options[[]byte, []byte]{Handle: func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) { return m.Data, nil }},
	})
	return recs, began
}

// checkFirstFailure waits for the stage's first failure and checks that it
// was logged at WARN within 10 s of the start, naming the broker address
// and the cause on one line, and that no log line shows the password.
func checkFirstFailure(t *testing.T, recs *records, began time.Time, addr string, causes ...string) {
	t.Helper()
	deadline := began.Add(10 * time.Second)
	var l logged
	for {
		var ok bool
		if l, ok = recs.first(slog.LevelWarn, "source failed; restarting"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no WARN within 10 s of the start; logged: %v", recs.snapshot())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if l.at.After(deadline) {
		t.Errorf("first failure logged %v after the start, want within 10 s", l.at.Sub(began))
	}
	var err error
	for _, a := range l.attrs {
		if e, ok := a.Value.Any().(error); ok && a.Key == "error" {
			err = e
		}
	}
	if err == nil {
		t.Fatalf("WARN carries no error: %s", l.text)
	}
	if !errors.Is(err, bpulsar.ErrSubscribe) {
		t.Errorf("error %v does not wrap ErrSubscribe", err)
	}
	msg := err.Error()
	t.Logf("first failure after %v: %s", l.at.Sub(began).Round(time.Millisecond), msg)
	if strings.ContainsAny(msg, "\r\n") {
		t.Errorf("error message has a line break: %q", msg)
	}
	if !strings.Contains(msg, addr) {
		t.Errorf("error %q does not name the broker %s", msg, addr)
	}
	found := false
	for _, c := range causes {
		found = found || strings.Contains(msg, c)
	}
	if !found {
		t.Errorf("error %q names none of the causes %q", msg, causes)
	}
	for _, l := range recs.snapshot() {
		if strings.Contains(l.text, "s3cret-pw") {
			t.Errorf("a log line shows the password: %s", l.text)
		}
	}
}

// With nothing listening at the broker's address, the stage's first
// failed subscribe is logged at WARN within 10 s, with the address and
// the cause, and the stage keeps failing (each attempt returns an error).
func TestNothingListeningWarnsWithin10s(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	recs, began := unreachable(t, addr)
	checkFirstFailure(t, recs, began, addr, "connection refused")
}

// A listener that accepts connections and never answers: the client's
// handshake is bounded, so the first failure is logged at WARN within 10 s.
func TestSilentListenerWarnsWithin10s(t *testing.T) {
	addr := testnet.SilentListener(t)
	recs, began := unreachable(t, addr)
	checkFirstFailure(t, recs, began, addr, "timeout", "deadline exceeded")
}

// ClientDefaults bounds the client's connect, operation and handshake
// (keep-alive) times, and keeps every value the caller set.
func TestClientDefaultsKeepExplicitValues(t *testing.T) {
	d := bpulsar.ClientDefaults(pulsar.ClientOptions{URL: "pulsar://x:6650"}, nil)
	if d.ConnectionTimeout != bpulsar.DefaultConnectionTimeout || d.OperationTimeout != bpulsar.DefaultOperationTimeout ||
		d.KeepAliveInterval != bpulsar.DefaultKeepAliveInterval || d.Logger == nil {
		t.Errorf("defaults not applied: %+v", d)
	}
	if d.OperationTimeout+d.ConnectionTimeout > 12*time.Second || d.KeepAliveInterval >= 10*time.Second || d.OperationTimeout >= 10*time.Second {
		t.Errorf("defaults let a failure take 10 s or more: %+v", d)
	}
	own := pulsar.ClientOptions{URL: "pulsar://x:6650", ConnectionTimeout: time.Minute, OperationTimeout: 2 * time.Minute,
		KeepAliveInterval: 3 * time.Minute, Logger: quietLogger()}
	k := bpulsar.ClientDefaults(own, nil)
	if k.ConnectionTimeout != time.Minute || k.OperationTimeout != 2*time.Minute || k.KeepAliveInterval != 3*time.Minute || k.Logger != own.Logger {
		t.Errorf("explicit values replaced: %+v", k)
	}
}
