package safehooks_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/internal/safehooks"
	"github.com/boulevard-go/boulevard/telemetry"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Guarantee: every hook of telemetry.Hooks, once wrapped, recovers its own
// panic and logs it as one error line naming the hook; the hook is still
// called with its event, and a hook left nil stays nil.
func TestWrapRecoversEveryHook(t *testing.T) {
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	var h telemetry.Hooks
	hv := reflect.ValueOf(&h).Elem()
	called := map[string]int{}
	var hooks []string
	for i := range hv.NumField() {
		f := hv.Type().Field(i)
		if f.Type.Kind() != reflect.Func {
			continue
		}
		name := f.Name
		hooks = append(hooks, name)
		hv.Field(i).Set(reflect.MakeFunc(f.Type, func([]reflect.Value) []reflect.Value {
			called[name]++
			panic("boom")
		}))
	}
	w := safehooks.Wrap(&h, log)
	wv := reflect.ValueOf(w).Elem()
	for _, name := range hooks {
		f := wv.FieldByName(name)
		logged.Reset()
		f.Call([]reflect.Value{reflect.ValueOf(context.Background()), reflect.New(f.Type().In(1)).Elem()})
		if called[name] != 1 {
			t.Errorf("%s: the user's hook was called %d times, want 1", name, called[name])
		}
		line := logged.String()
		if strings.Count(line, "\n") != 1 || !strings.Contains(line, "level=ERROR") ||
			!strings.Contains(line, "hook="+name) || !strings.Contains(line, "panic=boom") {
			t.Errorf("%s: want one error line naming the hook and the panic, got %q", name, line)
		}
	}
	if n := len(hooks); n < 13 {
		t.Fatalf("found %d hooks in telemetry.Hooks, want at least 13", n)
	}
	empty := safehooks.Wrap(&telemetry.Hooks{NoDurations: true, DurationSampling: 3}, log)
	ev := reflect.ValueOf(empty).Elem()
	for _, name := range hooks {
		if !ev.FieldByName(name).IsNil() {
			t.Errorf("%s: a nil hook became set", name)
		}
	}
	if !empty.NoDurations || empty.DurationSampling != 3 {
		t.Errorf("settings not kept: %+v", *empty)
	}
	if safehooks.Wrap(nil, log) != nil {
		t.Error("Wrap(nil) is not nil")
	}
}

// Guarantee: CallAside calls the hook with its event and returns once it
// has returned; a hook that panics, or ends its goroutine
// (runtime.Goexit), costs one error line naming the hook, with the
// caller's attributes (and the panic value), and the caller goes on.
func TestCallAsideContainsAPanicOrAnExitOfTheHook(t *testing.T) {
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	ctx := context.Background()
	got := 0
	safehooks.CallAside(ctx, log, "PartitionAssigned", func(_ context.Context, e int) { got = e }, 7, "topic", "t")
	if got != 7 || logged.Len() != 0 {
		t.Fatalf("a hook that returns: got event %d and logged %q, want 7 and nothing", got, logged.String())
	}
	for _, c := range []struct {
		name, msg, detail string
		hook              func(context.Context, int)
	}{
		{"panic", safehooks.Panicked, "panic=boom", func(context.Context, int) { panic("boom") }},
		{"exit", safehooks.Exited, "stack=", func(context.Context, int) { runtime.Goexit() }},
	} {
		logged.Reset()
		safehooks.CallAside(ctx, log, "PartitionRevoked", c.hook, 7, "topic", "t")
		line := logged.String()
		if strings.Count(line, "\n") != 1 || !strings.Contains(line, "level=ERROR") || !strings.Contains(line, fmt.Sprintf("%q", c.msg)) ||
			!strings.Contains(line, "topic=t hook=PartitionRevoked") || !strings.Contains(line, c.detail) {
			t.Errorf("a hook's %s logged %q, want one error line %q naming the hook, with the caller's attributes and %s", c.name, line, c.msg, c.detail)
		}
	}
}
