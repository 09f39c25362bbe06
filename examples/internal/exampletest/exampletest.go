// Package exampletest runs an example's main function in a child process
// (the example's own test binary), so that its tests can drive it as a
// user does: with flags, signals and exit statuses.
package exampletest

import (
	"errors"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/examples/internal/monitor"
)

// mainEnv tells a test binary started by Start to run the example's main
// instead of its tests.
const mainEnv = "BOULEVARD_EXAMPLE_MAIN"

// RunMain runs main and exits with status 0 when it returns, if the
// process was started by Start; otherwise it returns at once. Call it
// first in the example's TestMain.
func RunMain(main func()) {
	if os.Getenv(mainEnv) == "" {
		return
	}
	main()
	os.Exit(0)
}

// Process is an example's main running in a child process.
type Process struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdout monitor.Buffer
	stderr monitor.Buffer
	done   chan struct{}
	err    error // cmd.Wait's, set before done is closed
}

// Start runs the example's main in a child process with args as its
// command line. The process is killed, and waited for, when the test ends.
func Start(t *testing.T, args ...string) *Process {
	t.Helper()
	p := &Process{t: t, done: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0], args...)
	p.cmd.Env = append(os.Environ(), mainEnv+"=1")
	p.cmd.Stdout = &p.stdout
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// WaitOutput waits until the process has printed want to stdout, at most
// for d; it fails the test if it has not, or if the process exits first.
func (p *Process) WaitOutput(want string, d time.Duration) {
	p.t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(p.stdout.String(), want) {
		select {
		case <-p.done:
			if strings.Contains(p.stdout.String(), want) {
				return
			}
			p.t.Fatalf("exited (%v) before printing %q\nstdout:\n%s\nstderr:\n%s", p.err, want, p.stdout.String(), p.stderr.String())
		case <-deadline.C:
			p.t.Fatalf("did not print %q within %s\nstdout:\n%s\nstderr:\n%s", want, d, p.stdout.String(), p.stderr.String())
		case <-tick.C:
		}
	}
}

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
}

// Wait waits for the process to exit, at most for d, and returns its exit
// status; it fails the test if the process is still running after d, or
// if it was ended by a signal.
func (p *Process) Wait(d time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		p.t.Fatalf("still running %s later\nstdout:\n%s\nstderr:\n%s", d, p.stdout.String(), p.stderr.String())
	}
	var exit *exec.ExitError
	if errors.As(p.err, &exit) {
		if !exit.Exited() {
			p.t.Fatalf("ended by %v\nstdout:\n%s\nstderr:\n%s", exit, p.stdout.String(), p.stderr.String())
		}
		return exit.ExitCode()
	}
	if p.err != nil {
		p.t.Fatal(p.err)
	}
	return 0
}

// Pid returns the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Stdout returns what the process printed to stdout so far.
func (p *Process) Stdout() string { return p.stdout.String() }

// Stderr returns what the process printed to stderr so far.
func (p *Process) Stderr() string { return p.stderr.String() }

var (
	// helpFlag is a flag's first line in the -h output: "  -name type".
	helpFlag = regexp.MustCompile(`^  -([\w-]+)(?:\s|$)`)
	// helpDefault is the default the -h output gives a flag, unless it is
	// a sentence ("(default: an in-process broker)").
	helpDefault = regexp.MustCompile(`\(default ([^:)][^)]*)\)$`)
	// readmeFlag is a row of a README's flags table: | `-name` | default |
	readmeFlag = regexp.MustCompile("^\\| `-([\\w-]+)` \\| ([^|]*) \\|")
)

// CheckReadmeFlags runs the example with -h and fails the test unless the
// flags table of readme (the rows | `-name` | default | meaning |) lists
// exactly the flags the program has, each with the default -h gives it
// when -h gives one.
func CheckReadmeFlags(t *testing.T, readme string) {
	t.Helper()
	md, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]string{}
	for line := range strings.SplitSeq(string(md), "\n") {
		if m := readmeFlag.FindStringSubmatch(line); m != nil {
			documented[m[1]] = strings.Trim(strings.TrimSpace(m[2]), "`")
		}
	}
	p := Start(t, "-h")
	if code := p.Wait(time.Minute); code != 0 {
		t.Fatalf("-h exited with status %d\nstderr:\n%s", code, p.Stderr())
	}
	defaults := map[string]string{}
	var flag string
	for line := range strings.SplitSeq(p.Stderr(), "\n") {
		if strings.HasPrefix(line, "  -") {
			flag = "" // the test binary's own flags (-test.v) are not checked
			if m := helpFlag.FindStringSubmatch(line); m != nil {
				flag = m[1]
				defaults[flag] = ""
			}
		}
		if m := helpDefault.FindStringSubmatch(strings.TrimSpace(line)); m != nil && flag != "" {
			defaults[flag] = strings.Trim(m[1], `"`)
		}
	}
	if len(defaults) < 3 {
		t.Fatalf("read %d flags from -h; the test would check little\n%s", len(defaults), p.Stderr())
	}
	for _, name := range slices.Sorted(maps.Keys(defaults)) {
		doc, ok := documented[name]
		switch {
		case !ok:
			t.Errorf("%s has no row for -%s", readme, name)
		case defaults[name] != "" && doc != defaults[name]:
			t.Errorf("%s gives -%s the default %q, -h %q", readme, name, doc, defaults[name])
		}
	}
	for _, name := range slices.Sorted(maps.Keys(documented)) {
		if _, ok := defaults[name]; !ok {
			t.Errorf("%s lists -%s, which the program does not have", readme, name)
		}
	}
}
