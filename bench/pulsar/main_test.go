package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The comparison runs every side until it has handled every message
// (compare fails otherwise), and prints a rate per side and the ratios.
func TestCompareSmall(t *testing.T) {
	var out bytes.Buffer
	cfg := config{N: 3000, Payload: 10, Batch: 50, Rounds: 1, Stages: 2, Processors: 2, Initial: 100}
	if err := compare(context.Background(), cfg, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"plain loop, queue 1000", "plain loop, queue 100 ", "boulevard source", "source / plain loop, queue 100 "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
