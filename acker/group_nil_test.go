package acker_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
)

// Guarantee: outcomes added with a nil acknowledger go to Discard: flushing
// them is silent (no acknowledger call fails, nothing is logged).
func TestGroupNilAcknowledgerFlushesSilently(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var g acker.Group
	g.Add(nil, acker.Outcome{ID: 1})
	g.Add(nil, acker.Outcome{ID: 2, Err: context.Canceled})
	g.Flush(context.Background(), log)
	if buf.Len() != 0 {
		t.Fatalf("flushing outcomes of a nil acknowledger logged: %s", buf.String())
	}
}
