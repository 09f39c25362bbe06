package kafkatopology

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/redact"
)

// lineTimes is a slog.Handler that keeps when each record was logged,
// past the first, relative to the first.
type lineTimes struct {
	mu    sync.Mutex
	first time.Time
	after []time.Duration
}

func (h *lineTimes) Enabled(context.Context, slog.Level) bool { return true }
func (h *lineTimes) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *lineTimes) WithGroup(string) slog.Handler            { return h }
func (h *lineTimes) Handle(_ context.Context, rec slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.first.IsZero() {
		h.first = rec.Time
	} else {
		h.after = append(h.after, rec.Time.Sub(h.first))
	}
	return nil
}

// Guarantee: a stall that goes on is logged when it begins, then after
// FirstRepeatLog and at intervals that double up to MaxRepeatLog, however
// often its attempt is retried (here every second for four hours).
func TestAStallThatGoesOnIsLoggedAtGrowingIntervals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &lineTimes{}
		s := &stalls{}
		s.init("hold", slog.New(h), redact.Secrets{})
		err := errors.New("cannot")
		for range 4 * 3600 {
			s.fail(stallRelease, 0, 7, err)
			time.Sleep(time.Second)
		}
		m := time.Minute
		want := []time.Duration{m, 3 * m, 7 * m, 15 * m, 31 * m, 63 * m, 123 * m, 183 * m}
		if !slices.Equal(h.after, want) {
			t.Fatalf("lines after the first at %v, want %v", h.after, want)
		}
		if st := s.appendTo(nil); len(st) != 1 || st[0].Failures != 4*3600 || st[0].Offset != 7 {
			t.Fatalf("stalls = %+v, want one of 14400 failures at offset 7", st)
		}
	})
}

// Guarantee: the errors of a releaser's consumer group that stall
// nothing (sarama retries them) are logged once per error text and then
// at growing intervals, not once per retry.
func TestAReleaserGroupErrorThatRepeatsIsLoggedAtGrowingIntervals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &lineTimes{}
		s := &stalls{}
		s.init("hold", slog.New(h), redact.Secrets{})
		err := errors.New("kafka: broker not connected")
		for range 601 { // 0s to 60s
			s.groupError(err, func(int32) int64 { return -1 })
			time.Sleep(100 * time.Millisecond)
		}
		if want := []time.Duration{time.Minute}; !slices.Equal(h.after, want) {
			t.Fatalf("lines after the first at %v, want %v", h.after, want)
		}
	})
}

// Guarantee: a hold partition stalled by a fetch error that sarama
// retries is reported while the error goes on, and no longer once
// retriedQuiet passed without it (sarama reports no fetch that returns
// nothing); a batch that cannot be decoded is reported, however long,
// until the partition delivers a record from where the fetch failed (not
// one fetched before).
func TestAPartitionStalledByRetriedFetchErrorsIsReportedWhileTheyGoOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &stalls{}
		s.init("hold", slog.New(slog.DiscardHandler), redact.Secrets{})
		at := func(int32) int64 { return 5 }
		for range 10 {
			s.groupError(&sarama.ConsumerError{Topic: "hold", Partition: 1, Err: sarama.ErrUnknownTopicOrPartition}, at)
			time.Sleep(time.Second)
		}
		if st := s.appendTo(nil); len(st) != 1 || st[0].Partition != 1 || st[0].Offset != 5 || !errors.Is(st[0].Err, sarama.ErrUnknownTopicOrPartition) {
			t.Fatalf("stalls while the fetch errors go on = %+v, want partition 1 at offset 5", st)
		}
		time.Sleep(retriedQuiet)
		if st := s.appendTo(nil); len(st) != 0 {
			t.Fatalf("stalls %s after the last fetch error = %+v, want none", retriedQuiet, st)
		}
		s.groupError(&sarama.ConsumerError{Topic: "hold", Partition: 2, Err: sarama.PacketDecodingError{Info: "CRC"}}, at)
		time.Sleep(2 * time.Hour)
		if st := s.appendTo(nil); len(st) != 1 || !errors.Is(st[0].Err, ErrCorruptBatch) {
			t.Fatalf("stalls 2h after a batch that cannot be decoded = %+v, want partition 2", st)
		}
		s.fetched(2, 4) // fetched before the failure at 5
		if st := s.appendTo(nil); len(st) != 1 {
			t.Fatalf("stalls after a record fetched before the failure = %+v, want partition 2", st)
		}
		s.fetched(2, 5)
		if st := s.appendTo(nil); len(st) != 0 {
			t.Fatalf("stalls after a record of the partition = %+v, want none", st)
		}
	})
}

// Guarantee: a releaser's consumer group error that stalls nothing ends
// with one INFO line, counting its failures, when a session starts; the
// same error after that is logged again as a first line.
func TestAReleaserGroupErrorEndsWithOneLineWhenASessionStarts(t *testing.T) {
	var lines logtest.Lines
	s := &stalls{}
	s.init("hold", slog.New(slog.NewTextHandler(&lines, nil)), redact.Secrets{})
	err := errors.New("kafka: broker not connected")
	for range 5 {
		s.groupError(err, func(int32) int64 { return -1 })
	}
	s.keepOnly([]int32{0})
	s.keepOnly([]int32{0})
	if got := lines.All(); len(got) != 2 || !strings.Contains(got[1], "level=INFO") || !strings.Contains(got[1], "failures=5") {
		t.Fatalf("5 errors, then two sessions, logged %q, want the first line and one INFO line counting 5 failures", got)
	}
	s.groupError(err, func(int32) int64 { return -1 })
	if got := lines.All(); len(got) != 3 || !strings.Contains(got[2], "level=WARN") || strings.Contains(got[2], "(still)") {
		t.Fatalf("the error after a session started logged %q, want a first line again", got)
	}
}
