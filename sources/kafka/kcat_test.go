package kafka_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// requireKcat skips the test on a machine without kcat, unless
// BOULEVARD_REQUIRE_KCAT is set (.ci/run sets it after installing kcat), in
// which case a missing kcat fails the test.
func requireKcat(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("kcat"); err != nil {
		if os.Getenv("BOULEVARD_REQUIRE_KCAT") != "" {
			t.Fatalf("kcat is required for the interop test (apt-get install -y kcat): %v", err)
		}
		t.Skip("kcat is not installed (apt-get install -y kcat); .ci/run installs it and requires this test")
	}
}

// kcat runs Debian's kcat (installed by .ci/run) with args and stdin.
func kcat(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatalf("kcat is required for the interop test (apt-get install -y kcat): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat %v: %v\n%s", args, err, errb.String())
	}
	return out.String()
}

type seenRecord struct {
	value   string
	headers string
	offset  int64
	part    int32
}

func headerString(hs []kafka.Header) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = string(h.Key) + "=" + string(h.Value)
	}
	return strings.Join(parts, ",")
}

// Guarantee: records produced by an outside client (kcat, librdkafka) into a
// cluster on loopback reach handlers with the same keys, headers and
// payloads, and after the pipeline commits, kcat reading from the group's
// stored offsets starts exactly after what the pipeline handled.
func TestKcatInterop(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		requireKcat(t)
		const parts = 3
		group := "g-kcat"
		c := newCluster(t, parts)
		brokers := strings.Join(c.ListenAddrs(), ",")
		for _, a := range c.ListenAddrs() {
			if !strings.HasPrefix(a, "127.0.0.1:") {
				t.Fatalf("cluster listens on %s, not loopback", a)
			}
		}

		// Two kcat runs with different headers, keyed records "key-i:value-i".
		want := map[string]seenRecord{}
		for run, hdrs := range [][]string{{"trace=t-1", "origin=kcat"}, {"trace=t-2"}} {
			var in strings.Builder
			for i := range 20 {
				k, v := fmt.Sprintf("key-%d-%d", run, i), fmt.Sprintf("value %d/%d ✓", run, i)
				fmt.Fprintf(&in, "%s:%s\n", k, v)
				want[k] = seenRecord{value: v, headers: strings.Join(hdrs, ",")}
			}
			args := []string{"-P", "-b", brokers, "-t", testTopic, "-K", ":"}
			for _, h := range hdrs {
				args = append(args, "-H", h)
			}
			kcat(t, in.String(), args...)
		}

		var mu sync.Mutex
		got := map[string]seenRecord{}
		l := newLedger()
		src := cl.new(t, sourceOptions(c, group))
		p := startPipeline(t, pipelineOpts("kcat", src, 1, l, func(m *message.Message[[]byte]) error {
			md, _ := message.MetadataAs[*kafka.Metadata](m)
			mu.Lock()
			defer mu.Unlock()
			got[string(md.Key)] = seenRecord{value: string(m.Data), headers: headerString(md.Headers), offset: md.Offset, part: md.Partition}
			return nil
		}))
		wait.Within(t, 20*time.Second, "the kcat records", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got) == len(want)
		})
		ends := map[int32]int64{}
		mu.Lock()
		for k, w := range want {
			g := got[k]
			if g.value != w.value || g.headers != w.headers {
				t.Errorf("record %s: got value %q headers %q, want %q %q", k, g.value, g.headers, w.value, w.headers)
			}
			ends[g.part] = max(ends[g.part], g.offset+1)
		}
		mu.Unlock()
		wait.Within(t, 10*time.Second, "the commits", func() bool {
			cm := committed(c, group)
			for p, e := range ends {
				if cm[p] != e {
					return false
				}
			}
			return true
		})
		stopPipeline(t, p)

		// One more record per partition, then kcat reads from the group's
		// stored (committed) offsets: it must see exactly those, at the offsets
		// the pipeline committed. A missing commit would make it start from the
		// beginning (auto.offset.reset=earliest).
		for part := range int32(parts) {
			kcat(t, fmt.Sprintf("after-%d:tail\n", part), "-P", "-b", brokers, "-t", testTopic, "-p", fmt.Sprint(part), "-K", ":")
		}
		out := kcat(t, "", "-C", "-b", brokers, "-t", testTopic, "-o", "stored", "-e", "-J",
			"-X", "group.id="+group, "-X", "auto.offset.reset=earliest", "-X", "enable.auto.commit=false")
		sc := bufio.NewScanner(strings.NewReader(out))
		n := 0
		for sc.Scan() {
			var r struct {
				Partition int32  `json:"partition"`
				Offset    int64  `json:"offset"`
				Key       string `json:"key"`
			}
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("kcat output %q: %v", sc.Text(), err)
			}
			n++
			if r.Key != fmt.Sprintf("after-%d", r.Partition) || r.Offset != ends[r.Partition] {
				t.Errorf("kcat from the stored offsets read %s at %d/%d; the pipeline committed %d", r.Key, r.Partition, r.Offset, ends[r.Partition])
			}
		}
		if n != parts {
			t.Fatalf("kcat read %d records from the stored offsets, want %d:\n%s", n, parts, out)
		}
	})
}
