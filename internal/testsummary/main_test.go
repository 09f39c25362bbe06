package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Guarantee: tests are counted by outcome, package results (a package
// without test files is skipped) are not counted as tests, output is passed through, and non-JSON lines survive.
func TestSummarize(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestA"}`,
		`{"Action":"fail","Package":"p","Test":"TestB"}`,
		`{"Action":"skip","Package":"p","Test":"TestC"}`,
		`{"Action":"pass","Package":"p","Test":"TestA/sub"}`,
		`{"Action":"fail","Package":"p"}`,
		`# example.com/broken`,
		`{"Action":"pass","Package":"q"}`,
		`{"Action":"output","Package":"r","Output":"?   \tr\t[no test files]\n"}`,
		`{"Action":"skip","Package":"r"}`,
	}, "\n")
	var out strings.Builder
	c, err := summarize(strings.NewReader(in), &out)
	if err != nil {
		t.Fatal(err)
	}
	if c.passed != 2 || c.failed != 1 || c.skipped != 1 || c.failedPackages != 1 {
		t.Fatalf("counts %+v", c)
	}
	if got := c.String(); got != "tests: 2 passed, 1 failed, 1 skipped" {
		t.Fatalf("String() = %q", got)
	}
	if !strings.Contains(out.String(), "=== RUN   TestA\n") || !strings.Contains(out.String(), "# example.com/broken\n") {
		t.Fatalf("output not passed through: %q", out.String())
	}
}

// Guarantee: the recap at the end repeats the output of each failed test and
// of each package that failed, and nothing of what passed, so a CI log's
// last lines name the failure however long the log is.
func TestRecapRepeatsOnlyFailures(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"output","Package":"p","Test":"TestOK","Output":"=== RUN   TestOK\n"}`,
		`{"Action":"output","Package":"p","Test":"TestBad","Output":"=== RUN   TestBad\n"}`,
		`{"Action":"output","Package":"p","Test":"TestBad","Output":"    bad_test.go:9: want 3, got 2\n"}`,
		`{"Action":"output","Package":"p","Test":"TestOK","Output":"--- PASS: TestOK\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestOK"}`,
		`{"Action":"output","Package":"p","Test":"TestBad","Output":"--- FAIL: TestBad\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestBad"}`,
		`{"Action":"output","Package":"p","Output":"FAIL\n"}`,
		`{"Action":"fail","Package":"p"}`,
		// Output without a final newline is ended with one in the recap.
		`{"Action":"output","Package":"q","Output":"goleak: found unexpected goroutines"}`,
		`{"Action":"fail","Package":"q"}`,
		// A test run twice (go test -count=2) that passed, then failed.
		`{"Action":"output","Package":"s","Test":"TestTwice","Output":"run 1 passed\n"}`,
		`{"Action":"pass","Package":"s","Test":"TestTwice"}`,
		`{"Action":"output","Package":"s","Test":"TestTwice","Output":"run 2 failed\n"}`,
		`{"Action":"fail","Package":"s","Test":"TestTwice"}`,
		`{"Action":"output","Package":"r","Output":"ok  \tr\n"}`,
		`{"Action":"pass","Package":"r"}`,
	}, "\n")
	c, err := summarize(strings.NewReader(in), new(strings.Builder))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	recap(&out, c.failures)
	got := out.String()
	for _, want := range []string{
		"4 failed",
		"--- p TestBad\n=== RUN   TestBad\n    bad_test.go:9: want 3, got 2\n--- FAIL: TestBad\n",
		"--- p\nFAIL\n",
		"--- q\ngoleak: found unexpected goroutines\n\n--- s TestTwice\nrun 2 failed\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("recap lacks %q:\n%s", want, got)
		}
	}
	for _, never := range []string{"TestOK", "ok  \tr", "run 1 passed"} {
		if strings.Contains(got, never) {
			t.Errorf("recap repeats %q, which passed:\n%s", never, got)
		}
	}

	var none strings.Builder
	recap(&none, nil)
	if none.Len() != 0 {
		t.Errorf("recap of no failures printed %q", none.String())
	}
}

// Guarantee: of a failed test's output longer than the recap's bound, the
// recap keeps the beginning (where a timeout's panic names the running
// tests) and the end (where a failure usually is), and says what it cut.
func TestRecapKeepsBothEndsOfLongOutput(t *testing.T) {
	var x excerpt
	written := 0
	add := func(s string) {
		x.add(s)
		written += len(s)
	}
	add("panic: test timed out after 10m0s\n\trunning tests:\n\t\tTestHang (10m0s)\n")
	for range 10 * (maxHead + maxTail) / 10 {
		add("0123456789")
	}
	add("the failure\n")
	got := x.String()
	if len(x.head) != maxHead || len(x.tail) != maxTail {
		t.Fatalf("kept %d + %d bytes, want the first %d and the last %d", len(x.head), len(x.tail), maxHead, maxTail)
	}
	if want := fmt.Sprintf("[... %d bytes cut ...]", written-maxHead-maxTail); !strings.Contains(got, want) {
		t.Errorf("the cut is not said as %q", want)
	}
	if !strings.HasPrefix(got, "panic: test timed out after 10m0s\n\trunning tests:\n\t\tTestHang") {
		t.Errorf("the beginning was dropped: %q...", got[:80])
	}
	if !strings.HasSuffix(got, "the failure\n") {
		t.Errorf("the end was dropped: ...%q", got[len(got)-20:])
	}
	if !strings.Contains(got, " bytes cut ...]") {
		t.Errorf("the cut is not marked")
	}

	var short excerpt
	short.add("a\n")
	short.add("b\n")
	if short.String() != "a\nb\n" {
		t.Errorf("short output = %q, want it whole", short.String())
	}
}

// Guarantee: a package that did not build shows the compiler's errors, as
// go test -json reports them (build-output events), both where they come and
// in the recap under the package, and the command exits with status 1.
func TestABuildErrorIsShownAndRepeated(t *testing.T) {
	in := strings.Join([]string{
		`{"ImportPath":"x/broken [x/broken.test]","Action":"build-output","Output":"# x/broken [x/broken.test]\n"}`,
		`{"ImportPath":"x/broken [x/broken.test]","Action":"build-output","Output":"broken/b_test.go:3:32: declared and not used: x\n"}`,
		`{"ImportPath":"x/broken [x/broken.test]","Action":"build-fail"}`,
		`{"Action":"start","Package":"x/broken"}`,
		`{"Action":"output","Package":"x/broken","Output":"FAIL\tx/broken [build failed]\n"}`,
		`{"Action":"fail","Package":"x/broken","Elapsed":0,"FailedBuild":"x/broken [x/broken.test]"}`,
	}, "\n")
	var out, stderr strings.Builder
	if status := run(strings.NewReader(in), &out, &stderr); status != 1 {
		t.Errorf("exit status %d, want 1", status)
	}
	got := out.String()
	const compiler = "# x/broken [x/broken.test]\nbroken/b_test.go:3:32: declared and not used: x\n"
	if !strings.HasPrefix(got, compiler) {
		t.Errorf("the compiler's errors are not shown where they come:\n%s", got)
	}
	if !strings.Contains(got, "--- x/broken\n"+compiler+"FAIL\tx/broken [build failed]\n") {
		t.Errorf("the recap lacks the compiler's errors under the package:\n%s", got)
	}
}

// errReader fails its first Read.
type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("read failed") }

// Guarantee: the command exits with status 1 when a test failed, when a
// package failed outside its tests (a leak found by TestMain), or when its
// input could not be read, and 0 otherwise; its last line counts the tests.
// An output line longer than a bufio.Scanner's default bound is read whole.
func TestExitStatus(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	for _, c := range []struct {
		name   string
		in     io.Reader
		status int
		last   string
	}{
		{"all passed", strings.NewReader(`{"Action":"output","Package":"p","Test":"TestA","Output":"` + long + `\n"}` + "\n" +
			`{"Action":"pass","Package":"p","Test":"TestA"}` + "\n" + `{"Action":"pass","Package":"p"}`), 0, "tests: 1 passed, 0 failed, 0 skipped"},
		{"a test failed", strings.NewReader(`{"Action":"fail","Package":"p","Test":"TestA"}` + "\n" + `{"Action":"fail","Package":"p"}`), 1, "tests: 0 passed, 1 failed, 0 skipped"},
		{"a package failed", strings.NewReader(`{"Action":"pass","Package":"p","Test":"TestA"}` + "\n" + `{"Action":"fail","Package":"p"}`), 1, "tests: 1 passed, 0 failed, 0 skipped"},
		{"unreadable", errReader{}, 1, "tests: 0 passed, 0 failed, 0 skipped"},
	} {
		var out, stderr strings.Builder
		status := run(c.in, &out, &stderr)
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if status != c.status || lines[len(lines)-1] != c.last {
			t.Errorf("%s: exit status %d, last line %q; want %d, %q (stderr %q)", c.name, status, lines[len(lines)-1], c.status, c.last, stderr.String())
		}
		if c.name == "all passed" && !strings.Contains(out.String(), long) {
			t.Errorf("%s: the long line was not passed through", c.name)
		}
		if c.name == "unreadable" && !strings.Contains(stderr.String(), "read failed") {
			t.Errorf("%s: stderr %q does not say why", c.name, stderr.String())
		}
	}
}
