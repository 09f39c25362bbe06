package pulsartopic_test

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

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic"
)

// worker is one mpworker process and what it reported.
type worker struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{} // closed when the process has exited
	err   error         // its exit status, set before done closes

	mu      sync.Mutex
	lines   []string
	ready   bool
	handled map[int]int
	acked   map[int]bool
	badAck  []int // acked without having handled it first
}

func (w *worker) record(line string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines = append(w.lines, line)
	verb, arg, _ := strings.Cut(line, " ")
	v, _ := strconv.Atoi(arg)
	switch verb {
	case "ready":
		w.ready = true
	case "handled":
		w.handled[v]++
	case "acked":
		if w.handled[v] == 0 {
			w.badAck = append(w.badAck, v)
		}
		w.acked[v] = true
	}
}

func (w *worker) snapshot(f func(w *worker) bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return f(w)
}

// startWorker starts bin with args; the process is killed and awaited at
// t's cleanup if still running.
func startWorker(t *testing.T, bin, name string, args ...string) *worker {
	t.Helper()
	w := &worker{name: name, handled: map[int]int{}, acked: map[int]bool{}, done: make(chan struct{})}
	w.cmd = exec.Command(bin, args...)
	w.cmd.Stderr = &prefixWriter{t: t, name: name}
	stdout, err := w.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if w.stdin, err = w.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var read sync.WaitGroup
	read.Go(func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			w.record(sc.Text())
		}
	})
	go func() {
		read.Wait() // all output read before Wait closes the pipe
		w.err = w.cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() {
		_ = w.cmd.Process.Kill()
		<-w.done
	})
	return w
}

// prefixWriter logs a worker's standard error through t.
type prefixWriter struct {
	t    *testing.T
	name string
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.t.Logf("%s: %s", p.name, strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// Guarantee: members of one balanced group in separate processes share a
// topic's messages; when one is killed (SIGKILL) with a message handled but
// not acked, and a replacement joins, every published message is handled
// at least once, nothing is acked that its process did not handle, the
// group's backlog empties, and duplicates stay within the killed member's
// read-ahead. PULSARTOPIC_MP_MESSAGES sets the message count (default 300).
func TestMultiProcessBalancedGroup(t *testing.T) {
	n := 300
	if s := os.Getenv("PULSARTOPIC_MP_MESSAGES"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 30 {
			t.Fatalf("PULSARTOPIC_MP_MESSAGES=%q: want an integer ≥ 30", s)
		}
	}
	const capacity, stallAfter = 32, 5
	bin := filepath.Join(t.TempDir(), "mpworker")
	build := exec.Command("go", "build", "-o", bin, "./internal/mpworker")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	b := testbroker.Pulsar(t)
	be := newBackend(t, testOptions[int](b, topic.IntCodec{}))
	common := []string{"-url", b.URL(), "-topic", "jobs", "-capacity", strconv.Itoa(capacity)}
	consumer := func(name string, extra ...string) *worker {
		return startWorker(t, bin, name, append(append([]string{"-role", "consume"}, common...), extra...)...)
	}
	members := []*worker{
		consumer("consumer-0", "-stall-after", strconv.Itoa(stallAfter)),
		consumer("consumer-1"),
		consumer("consumer-2"),
	}
	for _, w := range members {
		wait.Within(t, patience, w.name+" ready", func() bool { return w.snapshot(func(w *worker) bool { return w.ready }) })
	}
	pub := startWorker(t, bin, "publisher", append([]string{"-role", "publish", "-n", strconv.Itoa(n)}, common...)...)

	// consumer-0 hangs holding its last message unacked: kill it, start a
	// replacement.
	victim := members[0]
	wait.Within(t, patience, "consumer-0 to stall", func() bool {
		return victim.snapshot(func(w *worker) bool { return len(w.handled) == stallAfter })
	})
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.done
	members = append(members, consumer("consumer-3"))
	wait.Within(t, patience, "consumer-3 ready", func() bool { return members[3].snapshot(func(w *worker) bool { return w.ready }) })

	<-pub.done
	if pub.err != nil {
		t.Fatalf("publisher: %v", pub.err)
	}
	full := be.TopicName("jobs")
	wait.Within(t, patience, "every message acked by some member", func() bool {
		acked := make(map[int]bool)
		for _, w := range members {
			w.snapshot(func(w *worker) bool {
				for v := range w.acked {
					acked[v] = true
				}
				return true
			})
		}
		return len(acked) == n && b.Backlog(full, "workers") == 0
	})
	for _, w := range members[1:] {
		_ = w.stdin.Close()
		<-w.done
		if w.err != nil {
			t.Fatalf("%s: %v", w.name, w.err)
		}
	}

	handled := make(map[int]int)
	var stalled int
	for _, w := range members {
		for v, k := range w.handled {
			handled[v] += k
			if w == victim && !w.acked[v] {
				stalled = v
			}
		}
		if len(w.badAck) > 0 {
			t.Fatalf("%s acked %v without handling them", w.name, w.badAck)
		}
	}
	for v := range n {
		if handled[v] == 0 {
			t.Fatalf("message %d was never handled", v)
		}
	}
	if handled[stalled] < 2 {
		t.Fatalf("message %d, handled by the killed member and never acked, was not handled again", stalled)
	}
	total := 0
	for _, k := range handled {
		total += k
	}
	if dup := total - n; dup > capacity {
		t.Fatalf("%d duplicates, more than the killed member's read-ahead (%d)", dup, capacity)
	}
	t.Logf("%d messages, %d handlings, 4 members (one killed)", n, total)
}
