package main

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Guarantee: tests are counted by outcome, package results are not counted
// as tests, output is passed through, and non-JSON lines survive.
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
		`{"Action":"output","Package":"q","Output":"goleak: found unexpected goroutines\n"}`,
		`{"Action":"fail","Package":"q"}`,
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
		"3 failed",
		"--- p TestBad\n=== RUN   TestBad\n    bad_test.go:9: want 3, got 2\n--- FAIL: TestBad\n",
		"--- p\nFAIL\n",
		"--- q\ngoleak: found unexpected goroutines\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("recap lacks %q:\n%s", want, got)
		}
	}
	for _, never := range []string{"TestOK", "ok  \tr"} {
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
	x.add("panic: test timed out after 10m0s\n\trunning tests:\n\t\tTestHang (10m0s)\n")
	for range 10 * (maxHead + maxTail) / 10 {
		x.add("0123456789")
	}
	x.add("the failure\n")
	got := x.String()
	if len(got) > maxHead+maxTail+100 {
		t.Fatalf("kept %d bytes, bound is %d", len(got), maxHead+maxTail)
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
