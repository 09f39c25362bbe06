package kafkatopic_test

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
)

// worker is one running mpworker process and the lines it printed.
type worker struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{} // closed when its output ended

	mu    sync.Mutex
	lines []string
}

func (w *worker) count(prefix string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, l := range w.lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

func (w *worker) snapshot() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.lines...)
}

// startWorker starts the worker binary with args and collects its output.
func startWorker(t *testing.T, bin, name string, args ...string) *worker {
	t.Helper()
	w := &worker{name: name, done: make(chan struct{})}
	w.cmd = exec.Command(bin, args...)
	w.cmd.Stderr = os.Stderr
	var err error
	if w.stdin, err = w.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := w.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(w.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			w.mu.Lock()
			w.lines = append(w.lines, sc.Text())
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = w.cmd.Process.Kill()
		<-w.done
		_ = w.cmd.Wait()
	})
	return w
}

// stop closes the worker's standard input (a consumer then settles what
// it holds and leaves its group) and waits up to within for it to exit.
func (w *worker) stop(t *testing.T, within time.Duration) {
	t.Helper()
	_ = w.stdin.Close()
	select {
	case <-w.done:
	case <-time.After(within):
		t.Fatalf("%s did not exit", w.name)
	}
	if err := w.cmd.Wait(); err != nil {
		t.Fatalf("%s: %v", w.name, err)
	}
}

// One publisher process and three consumer processes of one balanced
// group share a topic on a cluster on 127.0.0.1; one consumer is killed
// with SIGKILL mid-run and a replacement joins. Every published message is
// acked by some consumer (what the killed one held unacked is delivered
// again), no consumer acks a message it did not handle, and the
// duplicates stay within what the killed consumer took plus one
// read-ahead and ack group per member. BOULEVARD_KAFKATOPIC_MP_N sets the
// message count (default 600).
func TestMultiProcessBalancedGroup(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs five processes")
	}
	n := 600
	if v, err := strconv.Atoi(os.Getenv("BOULEVARD_KAFKATOPIC_MP_N")); err == nil && v >= 10 {
		n = v
	}
	const capacity, ackEvery = 16, 10
	// The waits on work done for every message grow with n beyond the
	// default.
	grown := testbroker.Patience(patience, n, 600)
	bin := filepath.Join(t.TempDir(), "mpworker")
	build := exec.Command("go", "build", "-o", bin, "./internal/mpworker")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, out)
	}
	c := testbroker.Kafka(t, kfake.NumBrokers(3))
	brokers := strings.Join(c.ListenAddrs(), ",")
	for _, a := range c.ListenAddrs() {
		if !strings.HasPrefix(a, "127.0.0.1:") {
			t.Fatalf("cluster listens on %s, not loopback", a)
		}
	}
	common := []string{"-brokers", brokers, "-topic", "jobs", "-partitions", "3",
		"-capacity", strconv.Itoa(capacity), "-ack-every", strconv.Itoa(ackEvery)}
	consumer := func(name string) *worker {
		w := startWorker(t, bin, name, append(common, "-role", "consumer", "-group", "workers")...)
		wait.Within(t, patience, name+" joining the group", func() bool { return w.count("ready") == 1 })
		return w
	}
	consumers := []*worker{consumer("consumer-1"), consumer("consumer-2"), consumer("consumer-3")}
	half := n / 2
	pub := startWorker(t, bin, "publisher", append(common, "-role", "publisher",
		"-from", "1", "-to", strconv.Itoa(half), "-then", strconv.Itoa(n-half))...)

	// Kill a consumer once it is handling messages, mid-stream.
	victim := consumers[0]
	wait.Within(t, patience, "the first consumer handling messages", func() bool { return victim.count("handled ") >= 5 })
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.done
	_ = victim.cmd.Wait()
	consumers = append(consumers[1:], consumer("consumer-4"))
	wait.Within(t, grown, "the first half published", func() bool { return pub.count("published ") == half })
	if _, err := io.WriteString(pub.stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	pub.stop(t, grown)

	all := append([]*worker{victim}, consumers...)
	acked := func() map[int]bool {
		set := map[int]bool{}
		for _, w := range all {
			for _, l := range w.snapshot() {
				if v, ok := strings.CutPrefix(l, "acked "); ok {
					k, _ := strconv.Atoi(v)
					set[k] = true
				}
			}
		}
		return set
	}
	deadline := time.Now().Add(2 * grown)
	for len(acked()) < n {
		if time.Now().After(deadline) {
			got := acked()
			var missing []int
			for v := 1; v <= n && len(missing) < 20; v++ {
				if !got[v] {
					missing = append(missing, v)
				}
			}
			t.Fatalf("%d of %d messages acked; missing %v", len(got), n, missing)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, w := range consumers {
		w.stop(t, patience)
	}

	if got := pub.count("published "); got != n {
		t.Fatalf("publisher published %d, want %d", got, n)
	}
	handledTotal := 0
	for _, w := range all {
		handled := map[string]bool{}
		for _, l := range w.snapshot() {
			if v, ok := strings.CutPrefix(l, "handled "); ok {
				handled[v] = true
				handledTotal++
			}
			if v, ok := strings.CutPrefix(l, "acked "); ok && !handled[v] {
				t.Fatalf("%s acked %s before handling it", w.name, v)
			}
		}
	}
	victimHandled := victim.count("handled ")
	bound := victimHandled + 4*(capacity+ackEvery)
	if dup := handledTotal - n; dup < 0 || dup > bound {
		t.Fatalf("%d handled for %d published: %d duplicates, bound %d", handledTotal, n, dup, bound)
	}
	t.Logf("%d messages, %d handled (the killed consumer %d), %d duplicates",
		n, handledTotal, victimHandled, handledTotal-n)
}
