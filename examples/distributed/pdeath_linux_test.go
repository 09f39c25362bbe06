//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/examples/internal/exampletest"
)

// procStat is what /proc/<pid>/stat says of a process: its state, its
// parent and its start time (which tells a reused pid apart).
type procStat struct {
	state       string
	ppid, start int64
}

// readStat reads /proc/<pid>/stat; ok is false when the process is gone.
func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, false
	}
	// The command name, in parentheses, may hold spaces: the fields
	// start after its last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return procStat{}, false
	}
	ppid, _ := strconv.ParseInt(f[1], 10, 64)
	start, _ := strconv.ParseInt(f[19], 10, 64)
	return procStat{state: f[0], ppid: ppid, start: start}, true
}

// childrenOf returns the pid and start time of every process whose parent
// is pid.
func childrenOf(t *testing.T, pid int) map[int]int64 {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]int64{}
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readStat(n); ok && st.ppid == int64(pid) {
			out[n] = st.start
		}
	}
	return out
}

// running reports whether the process pid that started at start is still
// running (a zombie has exited: only its parent has not reaped it yet).
func running(pid int, start int64) bool {
	st, ok := readStat(pid)
	return ok && st.start == start && st.state != "Z" && st.state != "X"
}

// Guarantee: the coordinator's processes do not outlive it: killed with
// SIGKILL (or ended at once by a second Ctrl-C), it takes no step to stop
// them, and each one receives SIGTERM from the kernel (its parent-death
// signal), drains and exits instead of running on, orphaned.
func TestProcessesExitWhenTheCoordinatorIsKilled(t *testing.T) {
	p := exampletest.Start(t, "-orders", strconv.Itoa(maxOrders), "-kill=false")
	p.WaitOutput("processes: archive", time.Minute)
	kids := childrenOf(t, p.Pid())
	if len(kids) != 5 {
		t.Fatalf("the coordinator has %d processes, want 5 (archive, fraud, enrich-1, enrich-2, ingest): %v", len(kids), kids)
	}
	t.Cleanup(func() {
		for pid, start := range kids {
			if running(pid, start) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	p.Signal(syscall.SIGKILL)
	// Each process drains with its broker gone (the coordinator ran it):
	// bounded by the pipelines' shutdown timeouts, well within this.
	bound := childStopTimeout + time.Minute
	deadline := time.Now().Add(bound)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var left []int
		for pid, start := range kids {
			if running(pid, start) {
				left = append(left, pid)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes %v still running %v after the coordinator was killed", left, bound)
		}
		<-tick.C
	}
}
