// Command testsummary reads the output of `go test -json` on standard input,
// prints the tests' human-readable output as go test would, and ends with a
// recap of what failed and one line counting the tests:
//
//	tests: 212 passed, 0 failed, 1 skipped
//
// The recap repeats the output of every failed test, and of every package
// that failed outside a test (a build error, with the compiler's messages,
// a panic after a timeout, a leak found by TestMain), so that the end of a
// long CI log names the failure. It exits with status 1 when a test or a
// package failed (including a package that did not build), so CI can pipe
// `go test -json` through it.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// maxHead and maxTail bound how much of one failed test's or package's
// output the recap repeats: its first maxHead bytes (where a timeout's
// panic names the tests that were running) and its last maxTail bytes
// (where a failure usually is), with what lies between cut.
const (
	maxHead = 8 << 10
	maxTail = 24 << 10
)

// event is the part of a test2json event this command reads.
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	// ImportPath names the package a build-output event is about.
	ImportPath string
	// FailedBuild is, on a package's fail event, the ImportPath whose
	// build failed.
	FailedBuild string
}

// failure is one failed test, or a package that failed (Test empty), with
// the head and tail of its output.
type failure struct {
	Package, Test, Output string
}

// counts is what summarize found.
type counts struct {
	passed, failed, skipped int
	failedPackages          int
	failures                []failure
}

func (c counts) String() string {
	return fmt.Sprintf("tests: %d passed, %d failed, %d skipped", c.passed, c.failed, c.skipped)
}

// key names a test, or a package's own output when test is empty.
type key struct{ pkg, test string }

// excerpt keeps the first maxHead and the last maxTail bytes written to it.
type excerpt struct {
	head, tail []byte
	cut        int // bytes dropped between head and tail
}

func (x *excerpt) add(s string) {
	if n := min(maxHead-len(x.head), len(s)); n > 0 {
		x.head = append(x.head, s[:n]...)
		s = s[n:]
	}
	x.tail = append(x.tail, s...)
	if over := len(x.tail) - maxTail; over > 0 {
		x.cut += over
		x.tail = append(x.tail[:0], x.tail[over:]...)
	}
}

func (x *excerpt) String() string {
	if x.cut == 0 {
		return string(x.head) + string(x.tail)
	}
	return fmt.Sprintf("%s\n[... %d bytes cut ...]\n%s", x.head, x.cut, x.tail)
}

// keep adds s to the excerpt of k in m, made if need be.
func keep[K comparable](m map[K]*excerpt, k K, s string) {
	x := m[k]
	if x == nil {
		x = &excerpt{}
		m[k] = x
	}
	x.add(s)
}

// summarize copies every output line of r to w, counts the test results and
// keeps the output of what failed. Lines that are not JSON (an error printed
// by go itself) are copied as they are. A build's output (build-output
// events: the compiler's errors) is copied too, and repeated with each
// package whose build it failed.
func summarize(r io.Reader, w io.Writer) (counts, error) {
	var c counts
	running := map[key]*excerpt{}
	builds := map[string]*excerpt{} // kept: several packages may fail on one build
	finish := func(k key, failed bool, build *excerpt) {
		if x := running[k]; failed {
			out := ""
			if build != nil {
				out = build.String()
			}
			if x != nil {
				out += x.String()
			}
			c.failures = append(c.failures, failure{Package: k.pkg, Test: k.test, Output: out})
		}
		delete(running, k)
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(w, "%s\n", line)
			continue
		}
		k := key{e.Package, e.Test}
		switch e.Action {
		case "output":
			io.WriteString(w, e.Output)
			keep(running, k, e.Output)
		case "build-output":
			io.WriteString(w, e.Output)
			keep(builds, e.ImportPath, e.Output)
		case "pass":
			if e.Test != "" {
				c.passed++
			}
			finish(k, false, nil)
		case "fail":
			if e.Test != "" {
				c.failed++
			} else {
				c.failedPackages++
			}
			finish(k, true, builds[e.FailedBuild])
		case "skip":
			if e.Test != "" {
				c.skipped++
			}
			finish(k, false, nil)
		}
	}
	return c, sc.Err()
}

// recap writes the output of every failure again, under one heading.
func recap(w io.Writer, fs []failure) {
	if len(fs) == 0 {
		return
	}
	fmt.Fprintf(w, "\n==> %d failed (tests and packages), their output again:\n", len(fs))
	for _, f := range fs {
		name := f.Package
		if f.Test != "" {
			name += " " + f.Test
		}
		fmt.Fprintf(w, "\n--- %s\n", name)
		io.WriteString(w, f.Output)
		if f.Output != "" && !strings.HasSuffix(f.Output, "\n") {
			io.WriteString(w, "\n")
		}
	}
	io.WriteString(w, "\n")
}

func main() {
	os.Exit(run(os.Stdin, os.Stdout, os.Stderr))
}

// run is the command reading in and writing to stdout and stderr; it
// returns the exit status: 1 when a test or a package failed or in could
// not be read, 0 otherwise.
func run(in io.Reader, stdout, stderr io.Writer) int {
	c, err := summarize(in, stdout)
	recap(stdout, c.failures)
	fmt.Fprintln(stdout, c)
	if err != nil {
		fmt.Fprintln(stderr, "testsummary:", err)
		return 1
	}
	if c.failed > 0 || c.failedPackages > 0 {
		return 1
	}
	return 0
}
