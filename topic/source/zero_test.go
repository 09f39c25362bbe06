package source_test

import (
	"errors"
	"testing"

	"github.com/boulevard-go/boulevard/internal/wraprun"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/source"
)

// Guarantee: a Source New did not make (a zero value, declared with var)
// holds nothing: its Close returns nil, without crashing the program, and
// its Run, handed a pipeline's stage (a source wrapping it), returns an
// error wrapping topic.ErrNotCreated at once instead of panicking.
func TestAZeroSourceClosesAndRefusesToRunWithoutCrashing(t *testing.T) {
	var zero source.Source[int]
	if err := zero.Close(t.Context()); err != nil {
		t.Errorf("Close of a zero Source: %v, want nil", err)
	}
	if err := wraprun.Run(t, zero.Run); !errors.Is(err, topic.ErrNotCreated) {
		t.Errorf("Run of a zero Source: %v, want an error wrapping topic.ErrNotCreated", err)
	}
}
