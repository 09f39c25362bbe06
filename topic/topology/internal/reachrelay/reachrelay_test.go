package reachrelay

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

type reports struct{ got []string }

func (r *reports) Degrade(err error) { r.got = append(r.got, fmt.Sprint("degrade: ", err)) }
func (r *reports) Recovered()        { r.got = append(r.got, "recovered") }

// Guarantee: an observer set while the reader cannot read hears so at
// once, with the last reason; it hears each later report, a recovery
// only after a degrade; once replaced it hears nothing more.
func TestRelayTellsTheObserverSetLastOnly(t *testing.T) {
	var r Relay
	r.Recovered() // reads already: nothing to tell
	r.Degrade(errors.New("first"))
	r.Degrade(errors.New("second"))
	first, next := &reports{}, &reports{}
	r.Set(first)
	r.Recovered()
	r.Recovered()
	r.Degrade(errors.New("third"))
	r.Set(next)
	r.Set(nil)
	r.Recovered()
	r.Degrade(errors.New("fourth"))
	if want := []string{"degrade: second", "recovered", "degrade: third"}; !slices.Equal(first.got, want) {
		t.Errorf("first observer heard %q, want %q", first.got, want)
	}
	if want := []string{"degrade: third"}; !slices.Equal(next.got, want) {
		t.Errorf("replaced observer heard %q, want %q", next.got, want)
	}
}

// Guarantee: an observer set while the reader can read hears nothing
// until a report: none before the first, none after a recovery.
func TestRelayTellsAnObserverSetWhileTheReaderReadsNothing(t *testing.T) {
	var r Relay
	first, next := &reports{}, &reports{}
	r.Set(first)
	r.Degrade(errors.New("down"))
	r.Recovered()
	r.Set(next)
	if want := []string{"degrade: down", "recovered"}; !slices.Equal(first.got, want) {
		t.Errorf("observer set before any report heard %q, want %q", first.got, want)
	}
	if len(next.got) != 0 {
		t.Errorf("observer set after a recovery heard %q, want nothing", next.got)
	}
}
