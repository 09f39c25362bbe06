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

// Guarantee: the recap keeps the end of a failed test's output when the
// output is longer than its bound, since that is where the failure is.
func TestRecapKeepsTheEndOfLongOutput(t *testing.T) {
	var tl tail
	for range 3 * maxRecap / 10 {
		tl.add("0123456789")
	}
	tl.add("the failure\n")
	if len(tl.b) > maxRecap {
		t.Fatalf("kept %d bytes, bound is %d", len(tl.b), maxRecap)
	}
	if !strings.HasSuffix(string(tl.b), "the failure\n") {
		t.Fatalf("the end was dropped: ...%q", tl.b[len(tl.b)-20:])
	}
}
