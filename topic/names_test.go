package topic_test

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"unicode/utf8"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/validate"
)

// printable fails the test if msg holds a control character, any other
// non-printable character or invalid UTF-8: what an error may not carry.
func printable(t *testing.T, what, msg string) {
	t.Helper()
	for i, r := range msg {
		if r == utf8.RuneError || !strconv.IsPrint(r) {
			t.Fatalf("%s: error holds %q at byte %d: %q", what, r, i, msg)
		}
	}
}

// Topic, group and alias names outside the documented character set are
// rejected by every call that takes one, with an error that shows the name
// quoted and escaped; names inside it are accepted.
func TestNamesOutsideTheCharacterSetAreRejected(t *testing.T) {
	bad := []string{
		"a\nb", "x\x1b[31mRED", "a b", "tab\t", "nul\x00", "del\x7f", "caf\u00e9", "rtl\u202e",
		"\xff\xfe", "a,b", "a:b", strings.Repeat("a", topic.MaxNameLen+1),
	}
	badTopic := append([]string{"/a", "a/", "a//b"}, bad...)
	for _, name := range badTopic {
		if _, err := topic.NewName(name); !errors.Is(err, topic.ErrInvalidName) {
			t.Errorf("NewName(%q) = %v, want ErrInvalidName", name, err)
		} else {
			printable(t, "NewName", err.Error())
		}
		_, err := topic.NewBroker[int]().CreateTopic(topic.Name(name), topic.Options{}, nil)
		var te *topic.TopicError
		if !errors.Is(err, topic.ErrInvalidName) || !errors.As(err, &te) {
			t.Errorf("CreateTopic(%q) = %v, want a *TopicError wrapping ErrInvalidName", name, err)
		} else {
			printable(t, "CreateTopic", err.Error())
		}
		if h, err := topic.NewTopic[int](topic.Name(name), topic.Options{}, nil); !errors.Is(err, topic.ErrInvalidName) {
			if h != nil {
				h.Close()
			}
			t.Errorf("NewTopic(%q) = %v, want ErrInvalidName", name, err)
		}
		if err := topic.NewTopicSet[int]().Bind(name, topic.Binding[int]{}); !errors.Is(err, topic.ErrInvalidName) {
			t.Errorf("Bind(%q) = %v, want ErrInvalidName", name, err)
		}
	}
	h := newIntTopic(t, topic.Options{})
	for _, name := range append([]string{"g/x"}, bad...) {
		if _, err := topic.NewGroupName(name); !errors.Is(err, topic.ErrInvalidName) {
			t.Errorf("NewGroupName(%q) = %v, want ErrInvalidName", name, err)
		}
		sub, err := h.Subscribe(t.Context(), topic.Balanced(topic.GroupName(name)), topic.SubscriberOptions{})
		if !errors.Is(err, topic.ErrInvalidName) {
			if sub != nil {
				sub.Close()
			}
			t.Errorf("Subscribe(Balanced(%q)) = %v, want ErrInvalidName", name, err)
			continue
		}
		printable(t, "Subscribe", err.Error())
		if q := strconv.Quote(name[:min(len(name), 8)]); !strings.Contains(err.Error(), q[1:len(q)-1]) {
			t.Errorf("Subscribe(Balanced(%q)) error %q does not show the name escaped", name, err)
		}
	}
	for _, name := range []string{"a", "orders-eu.v1_2", "A9", strings.Repeat("z", topic.MaxNameLen)} {
		if _, err := topic.NewGroupName(name); err != nil {
			t.Errorf("NewGroupName(%q) = %v", name, err)
		}
		if _, err := topic.NewName(name); err != nil {
			t.Errorf("NewName(%q) = %v", name, err)
		}
	}
	if _, err := topic.NewName("edge/raw"); err != nil {
		t.Errorf("NewName(edge/raw) = %v, want a group-scoped name accepted", err)
	}
	if _, err := topic.NewName(""); !errors.Is(err, topic.ErrEmptyName) {
		t.Errorf("NewName(\"\") = %v, want ErrEmptyName", err)
	}
}

// Every user-supplied string an error of package topic repeats (a backend
// name, an enum value, a topic name) is quoted and escaped, and a long one
// is cut and given with its length.
func TestErrorsQuoteAndEscapeUserStrings(t *testing.T) {
	evil := "auto, not evil\nlevel=ERROR msg=FORGED\x1b[31mRED"
	long := strings.Repeat("a", 1<<20)
	errs := map[string]func(string) error{
		"BackendByName": func(s string) error { _, err := topic.BackendByName[int](s); return err },
		"ParseOnLag":    func(s string) error { _, err := topic.ParseOnLag(s); return err },
		"ParseOnFull":   func(s string) error { _, err := topic.ParseOnFull(s); return err },
		"ParseMode":     func(s string) error { _, err := topic.ParseMode(s); return err },
		"ParseAckMode":  func(s string) error { _, err := topic.ParseAckMode(s); return err },
		"ParsePropagationMode": func(s string) error {
			_, err := topic.ParsePropagationMode(s)
			return err
		},
		"CreateTopic": func(s string) error {
			_, err := topic.NewBroker[int]().CreateTopic(topic.Name(s), topic.Options{}, nil)
			return err
		},
		"UnsupportedError": func(s string) error {
			return &topic.UnsupportedError{Backend: s, What: "mode", Value: s, Err: topic.ErrUnsupportedMode}
		},
	}
	for name, f := range errs {
		err := f(evil)
		if err == nil {
			t.Fatalf("%s accepted %q", name, evil)
		}
		msg := err.Error()
		printable(t, name, msg)
		if !strings.Contains(msg, `\n`) || !strings.Contains(msg, `\x1b[31mRED`) {
			t.Errorf("%s: error %q does not show the value escaped", name, msg)
		}
		msg = f(long).Error()
		if len(msg) > 1024 || !strings.Contains(msg, "…\" (1048576 bytes)") {
			t.Errorf("%s: error for a 1 MiB value is %d bytes: %.200q", name, len(msg), msg)
		}
	}
}

// Every capacity and in-flight bound has a documented upper limit, checked
// when a topic or tracked publisher is made: an extreme value is an error
// naming the field and the limit, never an allocation that panics or
// exhausts memory.
func TestOptionUpperBounds(t *testing.T) {
	for _, v := range []int{topic.MaxCapacity + 1, 100_000_000_000, math.MaxInt} {
		cases := []struct {
			field string
			opts  topic.Options
		}{
			{"balanced.queue_capacity", topic.Options{Balanced: topic.BalancedPolicy{Capacity: v}}},
			{"broadcast.queue_capacity", topic.Options{Mode: topic.BroadcastOnly, Broadcast: topic.BroadcastPolicy{Capacity: v}}},
			{"broadcast.queue_capacity", topic.Options{Mode: topic.Mixed, Broadcast: topic.BroadcastPolicy{Capacity: v}}},
			{"ack_propagation.max_in_flight", topic.Options{AckPropagation: topic.AckPropagation{MaxInFlight: v}}},
		}
		for _, c := range cases {
			h, err := topic.NewTopic[int]("t", c.opts, nil)
			if err == nil {
				h.Close()
				t.Fatalf("%s = %d accepted", c.field, v)
			}
			var es validate.Errors
			if !errors.As(err, &es) || !es.Has(c.field, "lte") || !strings.Contains(err.Error(), c.field+" must be ≤ 1048576") {
				t.Fatalf("%s = %d: error %v, want %s must be ≤ 1048576", c.field, v, err, c.field)
			}
		}
	}
	h := newIntTopic(t, topic.Options{})
	if _, err := h.Tracked(topic.TrackedOptions{MaxInFlight: math.MaxInt}); err == nil || !strings.Contains(err.Error(), "max_in_flight must be ≤ 1048576") {
		t.Fatalf("Tracked(MaxInFlight: MaxInt) = %v, want the upper bound", err)
	}
	// The bounds themselves are accepted.
	top := topic.Options{Balanced: topic.BalancedPolicy{Capacity: topic.MaxCapacity},
		Broadcast: topic.BroadcastPolicy{Capacity: topic.MaxCapacity}, AckPropagation: topic.AckPropagation{MaxInFlight: topic.MaxInFlightLimit}}
	if err := top.WithDefaults().Validate(); err != nil {
		t.Fatalf("options at the bounds rejected: %v", err)
	}
}

// Stats.Published counts a publish from the moment it starts: one still
// waiting for room is counted, and taken back if it then fails.
func TestStatsPublishedCountsAWaitingPublish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newIntTopic(t, topic.Options{Balanced: topic.BalancedPolicy{Capacity: 1}})
		subscribeInt(t, h, topic.Balanced("g"))
		if err := h.Publish(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- h.Publish(ctx, 2) }()
		synctest.Wait() // the second publish waits for room
		if got := h.Stats().Published; got != 2 {
			t.Fatalf("Published with one publish waiting = %d, want 2", got)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("waiting publish returned %v, want context.Canceled", err)
		}
		if got := h.Stats().Published; got != 1 {
			t.Fatalf("Published after the waiting publish was cancelled = %d, want 1", got)
		}
	})
}
