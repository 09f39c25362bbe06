package acker_test

import (
	"context"
	"runtime"
	"testing"
	"weak"

	"github.com/boulevard-go/boulevard/acker"
)

// Guarantee: a Group keeps its buffers across Flush and Reset but not the
// outcomes in them: once flushed or reset, a message, its ack data and its
// error can be collected while the Group lives on.
func TestGroupHoldsNoOutcomeOnceFlushedOrReset(t *testing.T) {
	for name, done := range map[string]func(*acker.Group){
		"Flush": func(g *acker.Group) { g.Flush(context.Background(), nil) },
		"Reset": func(g *acker.Group) { g.Reset() },
	} {
		var g acker.Group
		data, msg := new([64]byte), new([64]byte)
		wd, wm := weak.Make(data), weak.Make(msg)
		g.Add(acker.Discard, acker.Outcome{ID: 1, Data: data, Message: msg})
		g.Add(acker.Discard, acker.Outcome{ID: 2, Err: context.Canceled, Data: data, Message: msg})
		done(&g)
		data, msg = nil, nil
		runtime.GC()
		if wd.Value() != nil || wm.Value() != nil {
			t.Errorf("after %s the Group still holds its outcomes' ack data or message", name)
		}
		runtime.KeepAlive(&g)
	}
}
