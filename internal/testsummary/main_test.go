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
