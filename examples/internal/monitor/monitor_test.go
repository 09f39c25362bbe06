package monitor

import (
	"context"
	"flag"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/observe"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// -linger alone means until interrupted, -linger=d that long, and a bad
// value is refused.
func TestLingerFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want Linger
		bad  bool
	}{
		{nil, 0, false},
		{[]string{"-linger"}, Forever, false},
		{[]string{"-linger=30s"}, Linger(30 * time.Second), false},
		{[]string{"-linger=false"}, 0, false},
		{[]string{"-linger=0s"}, 0, false},
		{[]string{"-linger=soon"}, 0, true},
		{[]string{"-linger=-1s"}, 0, true},
	} {
		var f Flags
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f.Register(fs)
		err := fs.Parse(append(c.args, "-http", "127.0.0.1:0"))
		if (err != nil) != c.bad {
			t.Errorf("%v: error %v, want error %v", c.args, err, c.bad)
			continue
		}
		if !c.bad && (f.Linger != c.want || f.HTTP != "127.0.0.1:0") {
			t.Errorf("%v: linger %v http %q, want %v", c.args, f.Linger, f.HTTP, c.want)
		}
	}
}

// Guarantee: what a Linger's String says (flag's usage output) sets the
// same Linger back.
func TestLingerStringSetsItBack(t *testing.T) {
	for _, l := range []Linger{0, Forever, Linger(90 * time.Second)} {
		var got Linger
		if err := got.Set(l.String()); err != nil || got != l {
			t.Errorf("Set(%q) = %v, %v; want %v", l.String(), got, err, l)
		}
	}
}

// Guarantee: Serve prints the addresses of /metrics and /dashboard, the
// health checks and /stats, and each answers there.
func TestServePrintsWhereItServes(t *testing.T) {
	var out Buffer
	s, err := Flags{HTTP: "127.0.0.1:0"}.Serve(context.Background(), observe.New(observe.Options{}), &out)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	m := regexp.MustCompile(`^metrics on (http://[^/]+)/metrics, health on /healthz and /readyz, stats on /stats, dashboard on (http://[^/]+)/dashboard\n$`).FindStringSubmatch(out.String())
	if m == nil || m[1] != "http://"+s.Addr || m[2] != m[1] {
		t.Fatalf("Serve printed %q, want the addresses of http://%s", out.String(), s.Addr)
	}
	for _, path := range []string{"/metrics", "/healthz", "/readyz", "/stats", "/dashboard"} {
		resp, err := http.Get(m[1] + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusNotFound {
			t.Errorf("%s: %s", path, resp.Status)
		}
	}
}

// Guarantee: an address Serve cannot listen on is an error naming -http,
// with no server.
func TestServeOnABusyAddressFails(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s, err := Flags{HTTP: l.Addr().String()}.Serve(context.Background(), observe.New(observe.Options{}), io.Discard)
	if s != nil || err == nil || !strings.HasPrefix(err.Error(), "-http: ") {
		t.Fatalf("Serve on a busy address = %v, %v; want no server and an error naming -http", s, err)
	}
}

// Without -http nothing is served and Close does nothing.
func TestNoHTTPServesNothing(t *testing.T) {
	s, err := Flags{}.Serve(context.Background(), observe.New(observe.Options{}), io.Discard)
	if err != nil || s != nil {
		t.Fatalf("got %v, %v; want no server", s, err)
	}
	s.Close(context.Background())
}

func get(addr string) error {
	resp, err := http.Get("http://" + addr + "/healthz")
	if err == nil {
		resp.Body.Close()
	}
	return err
}

// With -linger the handler keeps answering after the run, until the
// context ends; then the server stops.
func TestLingerKeepsServingUntilInterrupted(t *testing.T) {
	var out Buffer
	s, err := Flags{HTTP: "127.0.0.1:0", Linger: Forever}.Serve(context.Background(), observe.New(observe.Options{}), &out)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	closed := make(chan struct{})
	go func() { s.Close(ctx); close(closed) }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "until interrupted") {
		if time.Now().After(deadline) {
			t.Fatalf("never said it lingers:\n%s", out.String())
		}
		time.Sleep(time.Millisecond)
	}
	if err := get(s.Addr); err != nil {
		t.Fatalf("not serving while lingering: %v", err)
	}
	select {
	case <-closed:
		t.Fatal("Close returned before the context ended")
	default:
	}
	cancel()
	<-closed
	if err := get(s.Addr); err == nil {
		t.Fatal("still serving after Close")
	}
	if strings.Contains(out.String(), "stopped serving") {
		t.Fatalf("said the close was cut short, with no request being answered:\n%s", out.String())
	}
}

// -linger=d says so, and stops serving once d has passed.
func TestLingerDurationEnds(t *testing.T) {
	var out Buffer
	s, err := Flags{HTTP: "127.0.0.1:0", Linger: Linger(50 * time.Millisecond)}.Serve(context.Background(), observe.New(observe.Options{}), &out)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s.Close(context.Background())
	if el := time.Since(start); el < 50*time.Millisecond {
		t.Fatalf("Close returned after %v, before the 50ms linger", el)
	}
	if err := get(s.Addr); err == nil {
		t.Fatal("still serving after Close")
	}
	if want := "still serving on http://" + s.Addr + " for 50ms (-linger)\n"; !strings.Contains(out.String(), want) {
		t.Fatalf("output %q lacks %q", out.String(), want)
	}
}

// Guarantee: once the context has ended (the run was interrupted), Close
// stops serving at once, whatever -linger says, and does not say it
// lingers.
func TestLingerEndsWithTheContext(t *testing.T) {
	var out Buffer
	s, err := Flags{HTTP: "127.0.0.1:0", Linger: Linger(time.Hour)}.Serve(context.Background(), observe.New(observe.Options{}), &out)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.Close(ctx)
	if err := get(s.Addr); err == nil {
		t.Fatal("still serving after Close")
	}
	if strings.Contains(out.String(), "still serving") || strings.Contains(out.String(), "stopped serving") {
		t.Fatalf("output %q, want only where it served", out.String())
	}
}

// Guarantee: an -http address without a host (":0", ":8080") listens on the
// loopback interface only, not on every interface as net.Listen would; a
// host given (0.0.0.0, an interface's address) is used as given.
func TestHTTPWithoutAHostListensOnLoopbackOnly(t *testing.T) {
	for _, c := range []struct{ http, host string }{
		{":0", "127.0.0.1"},
		{"127.0.0.1:0", "127.0.0.1"},
		{"0.0.0.0:0", "::"}, // told otherwise: every interface (Go reports it as [::] on a dual-stack host)
	} {
		s, err := Flags{HTTP: c.http}.Serve(context.Background(), observe.New(observe.Options{}), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		host, _, err := net.SplitHostPort(s.Addr)
		s.Close(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if c.host == "::" {
			if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
				t.Errorf("-http %s listens on %s, want every interface", c.http, s.Addr)
			}
			continue
		}
		if host != c.host {
			t.Errorf("-http %s listens on %s, want host %s", c.http, s.Addr, c.host)
		}
	}
}
