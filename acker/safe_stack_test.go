package acker_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
)

// panickingAck is an acknowledger's Ack that panics.
func panickingAck(context.Context, []acker.Outcome, []acker.Outcome) { panic("offset table corrupt") }

// Guarantee: a panicking acknowledger is logged once, with the panic's
// value, the stack of the panic, so that the line leads to the code that
// panicked, and how many successful and failed outcomes it lost.
func TestSafeLogsThePanicOfAnAcknowledgerWithItsStack(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	bad := acker.Func(panickingAck)
	if acker.Safe(context.Background(), log, &bad, []acker.Outcome{{ID: 1}}, []acker.Outcome{{ID: 2, Err: context.Canceled}, {ID: 3, Err: context.Canceled}}) {
		t.Fatal("Safe reported a panicking Ack as returned")
	}
	out := buf.String()
	if n := strings.Count(out, "acknowledger panicked"); n != 1 {
		t.Fatalf("%d log lines, want 1: %s", n, out)
	}
	if !strings.Contains(out, "offset table corrupt") || !strings.Contains(out, "panickingAck") {
		t.Errorf("log line %q, want the panic value and its stack (panickingAck)", out)
	}
	if !strings.Contains(out, "successful=1 failed=2") {
		t.Errorf("log line %.160q…, want the counts of lost outcomes successful=1 failed=2", out)
	}
}
