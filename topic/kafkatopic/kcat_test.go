package kafkatopic_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
)

// kcat runs Debian's kcat with args and stdin, skipping the test when it
// is not installed (unless BOULEVARD_REQUIRE_KCAT is set, as .ci/run does).
func kcat(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("BOULEVARD_REQUIRE_KCAT") != "" {
			t.Fatalf("kcat is required for the interop test (apt-get install -y kcat): %v", err)
		}
		t.Skip("kcat is not installed (apt-get install -y kcat)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat %v: %v: %s", args, err, errb.String())
	}
	return out.String()
}

// An outside client sees what the backend publishes, and the backend's
// subscribers see what an outside client publishes: kcat (librdkafka)
// reads the keys, headers and payloads the backend wrote, and a balanced
// group and a broadcast subscriber receive the payloads and headers kcat
// wrote.
func TestKcatInterop(t *testing.T) {
	kcat(t, "", "-V") // skips when kcat is missing
	c := testbroker.Kafka(t)
	brokers := strings.Join(c.ListenAddrs(), ",")
	o := testOptions[string](c, topic.StringCodec{})
	o.Partitions = 2
	o.Key = func(v string) []byte { k, _, _ := strings.Cut(v, "="); return []byte(k) }
	o.Headers = func(v string) []sarama.RecordHeader {
		k, _, _ := strings.Cut(v, "=")
		return []sarama.RecordHeader{{Key: []byte("origin"), Value: []byte("boulevard")}, {Key: []byte("trace"), Value: []byte("t-" + k)}}
	}
	b := newBackend(t, o)
	h := newTopic(t, b, "interop/one", topic.Options{Mode: topic.Mixed})

	// Backend → kcat.
	var want []string
	for i := range 10 {
		v := fmt.Sprintf("key-%d=value %d ✓", i, i)
		if err := h.Publish(ctxT(t), v); err != nil {
			t.Fatal(err)
		}
		k, _, _ := strings.Cut(v, "=")
		want = append(want, fmt.Sprintf("%s|origin=boulevard,trace=t-%s|%s", k, k, v))
	}
	out := kcat(t, "", "-C", "-b", brokers, "-t", "interop.one", "-o", "beginning", "-e", "-q", "-f", "%k|%h|%s\n")
	got := strings.Split(strings.TrimSpace(out), "\n")
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("kcat read:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// kcat → backend.
	g := subscribe(t, h, topic.Balanced("readers"))
	bc := subscribe(t, h, topic.Broadcast())
	var in strings.Builder
	var sent []string
	for i := range 10 {
		v := fmt.Sprintf("from kcat %d ✓", i)
		fmt.Fprintf(&in, "k%d:%s\n", i, v)
		sent = append(sent, v)
	}
	kcat(t, in.String(), "-P", "-b", brokers, "-t", "interop.one", "-K", ":", "-H", "origin=kcat")
	for _, s := range []*topic.Subscription[string]{g, bc} {
		var vs []string
		for range sent {
			it := recv(t, s)
			vs = append(vs, it.Value)
			if it.Headers["origin"] != "kcat" || len(it.Headers) != 1 {
				t.Fatalf("%v received %q with headers %v, want origin=kcat", s.Mode(), it.Value, it.Headers)
			}
			_ = s.Ack(it.ID)
		}
		slices.Sort(vs)
		slices.Sort(sent)
		if !slices.Equal(vs, sent) {
			t.Fatalf("%v received %q, want %q", s.Mode(), vs, sent)
		}
	}
}
