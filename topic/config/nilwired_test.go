package config_test

import (
	"context"
	"testing"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/config"
)

// TestANilWiredHasNothingAndClosesWithoutError checks that the nil *Wired
// a failed Build returns answers every method, with nothing wired, instead
// of panicking.
func TestANilWiredHasNothingAndClosesWithoutError(t *testing.T) {
	w, err := config.Build[int](topic.NewBroker[int](), nil)
	if err == nil || w != nil {
		t.Fatalf("Build without a plan = %v, %v; want nil and an error", w, err)
	}
	if err := w.Close(context.Background()); err != nil {
		t.Errorf("Close = %v, want nil", err)
	}
	if s := w.TopicSet("p"); s != nil {
		t.Errorf("TopicSet = %v, want nil", s)
	}
	if subs := w.Subscriptions("p"); subs != nil {
		t.Errorf("Subscriptions = %v, want nil", subs)
	}
	if _, ok := w.Publisher("p", "a"); ok {
		t.Error("Publisher found a binding")
	}
}
