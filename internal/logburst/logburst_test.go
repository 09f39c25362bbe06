package logburst_test

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/internal/logburst"
	"github.com/boulevard-go/boulevard/internal/logtest"
)

func logger(l *logtest.Lines) *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Guarantee: a burst of like warnings within Interval costs one line; the
// next line after the interval counts the ones held back, and Flush says
// what is still held back, once.
func TestABurstIsOneLineAndTheNextCountsIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lines logtest.Lines
		log := logger(&lines)
		var l logburst.Limiter
		ctx := context.Background()
		for i := range 1000 {
			l.Log(ctx, log, slog.LevelWarn, "could not settle", slog.Int("i", i))
		}
		got := lines.All()
		if len(got) != 1 || !strings.Contains(got[0], "i=0") || strings.Contains(got[0], logburst.HeldBackKey) {
			t.Fatalf("a burst of 1000 logged %q, want the first line alone", got)
		}
		time.Sleep(logburst.Interval - time.Nanosecond)
		l.Log(ctx, log, slog.LevelWarn, "could not settle", slog.Int("i", 1000))
		if n := len(lines.All()); n != 1 {
			t.Fatalf("a line within the interval was logged: %q", lines.All())
		}
		time.Sleep(time.Nanosecond)
		l.Log(ctx, log, slog.LevelWarn, "could not settle", slog.Int("i", 1001))
		got = lines.All()
		if len(got) != 2 || !strings.Contains(got[1], "i=1001") || !strings.Contains(got[1], "held_back=1000") {
			t.Fatalf("the line after the interval: %q, want i=1001 counting 1000 held back", got)
		}
		l.Log(ctx, log, slog.LevelWarn, "could not settle", slog.Int("i", 1002))
		l.Flush(ctx, log, slog.LevelWarn, "not settled since the last line")
		l.Flush(ctx, log, slog.LevelWarn, "not settled since the last line")
		got = lines.All()
		if len(got) != 3 || !strings.Contains(got[2], "not settled since the last line") || !strings.Contains(got[2], "held_back=1") {
			t.Fatalf("Flush twice: %q, want one line counting 1 held back", got)
		}
		// After Flush the next warning is logged at once.
		l.Log(ctx, log, slog.LevelWarn, "could not settle", slog.Int("i", 1003))
		if got := lines.All(); len(got) != 4 || strings.Contains(got[3], logburst.HeldBackKey) {
			t.Fatalf("the first warning after Flush: %q, want it logged with nothing held back", got)
		}
	})
}

// Guarantee: Flush with nothing held back logs nothing.
func TestFlushWithNothingHeldBackIsSilent(t *testing.T) {
	var lines logtest.Lines
	log := logger(&lines)
	var l logburst.Limiter
	l.Flush(context.Background(), log, slog.LevelWarn, "held back")
	l.Log(context.Background(), log, slog.LevelWarn, "one")
	l.Flush(context.Background(), log, slog.LevelWarn, "held back")
	if got := lines.All(); len(got) != 1 {
		t.Fatalf("logged %q, want the one warning only", got)
	}
}

// Guarantee: warnings from many goroutines at once are each either logged
// or counted: the logged lines plus the held-back counts they and Flush
// report add up to every warning.
func TestConcurrentWarningsAreEachLoggedOrCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lines logtest.Lines
		log := logger(&lines)
		var l logburst.Limiter
		ctx := context.Background()
		const goroutines, each = 8, 500
		var wg sync.WaitGroup
		for range goroutines {
			wg.Go(func() {
				for i := range each {
					if i == each/2 {
						time.Sleep(logburst.Interval)
					}
					l.Log(ctx, log, slog.LevelWarn, "w")
				}
			})
		}
		wg.Wait()
		l.Flush(ctx, log, slog.LevelWarn, "flush")
		total := 0 // the warnings logged, and those counted held back
		for _, line := range lines.All() {
			if strings.Contains(line, "msg=w") {
				total++
			}
			if _, after, ok := strings.Cut(line, "held_back="); ok {
				n, err := strconv.Atoi(strings.TrimSpace(after))
				if err != nil {
					t.Fatalf("held_back in %q: %v", line, err)
				}
				total += n
			}
		}
		if total != goroutines*each {
			t.Fatalf("lines and counts add up to %d, want %d: %q", total, goroutines*each, lines.All())
		}
	})
}

// Guarantee: the first line of a burst counts nothing held back, however
// many goroutines log at once: a line held back because of it counts
// towards the next line.
func TestTheFirstLineOfAConcurrentBurstCountsNothingHeldBack(t *testing.T) {
	for round := range 2000 {
		var lines logtest.Lines
		log := logger(&lines)
		l := logburst.Limiter{Every: time.Hour} // a burst, however slow the machine
		ctx := context.Background()
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 4 {
			wg.Go(func() {
				<-start
				for range 20 {
					l.Log(ctx, log, slog.LevelWarn, "w")
				}
			})
		}
		close(start)
		wg.Wait()
		if got := lines.All(); len(got) != 1 || strings.Contains(got[0], logburst.HeldBackKey) {
			t.Fatalf("round %d: a burst logged %q, want one line counting nothing held back", round, got)
		}
	}
}

// Guarantee: a Limiter holds like lines back for its own interval (Every)
// when it has one, not for Interval.
func TestEveryIsTheIntervalOfItsLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lines logtest.Lines
		log := logger(&lines)
		l := logburst.Limiter{Every: 3 * logburst.Interval}
		ctx := context.Background()
		for i := range 100 {
			l.Log(ctx, log, slog.LevelWarn, "message failed", slog.Int("i", i))
		}
		time.Sleep(logburst.Interval)
		l.Log(ctx, log, slog.LevelWarn, "message failed", slog.Int("i", 100))
		if got := lines.All(); len(got) != 1 {
			t.Fatalf("lines within Every, past Interval: %q, want the first alone", got)
		}
		time.Sleep(2 * logburst.Interval)
		l.Log(ctx, log, slog.LevelWarn, "message failed", slog.Int("i", 101))
		if got := lines.All(); len(got) != 2 || !strings.Contains(got[1], "i=101") || !strings.Contains(got[1], "held_back=100") {
			t.Fatalf("the line after Every: %q, want i=101 counting 100 held back", got)
		}
	})
}

// Guarantee: a Limiter whose Every is negative logs every line, and its
// Flush has nothing to say.
func TestANegativeEveryLogsEveryLine(t *testing.T) {
	var lines logtest.Lines
	log := logger(&lines)
	k := logburst.Kind{Limiter: logburst.Limiter{Every: -1}, Level: slog.LevelWarn, Msg: "message failed"}
	ctx := context.Background()
	for i := range 1000 {
		k.Line(ctx, log, slog.Int("i", i))
	}
	k.FlushHeld(ctx, log)
	got := lines.All()
	if len(got) != 1000 || !strings.Contains(got[999], "i=999") {
		t.Fatalf("%d lines for 1000 warnings, want 1000", len(got))
	}
	if held := lines.Matching(logburst.HeldBackKey); len(held) > 0 {
		t.Fatalf("lines counting some held back: %q", held)
	}
}

// Guarantee: a Kind logs its lines at its level with its message, and
// FlushHeld says what it held back under the same message.
func TestAKindFlushesUnderItsMessage(t *testing.T) {
	var lines logtest.Lines
	log := logger(&lines)
	k := logburst.Kind{Level: slog.LevelError, Msg: "handler panicked; message failed"}
	ctx := context.Background()
	for range 5 {
		k.Line(ctx, log, slog.String("panic", "boom"))
	}
	k.FlushHeld(ctx, log)
	got := lines.All()
	if len(got) != 2 || !strings.Contains(got[0], `level=ERROR msg="handler panicked; message failed" panic=boom`) ||
		!strings.Contains(got[1], `level=ERROR msg="handler panicked; message failed`+logburst.HeldBackSuffix+`" held_back=4`) {
		t.Fatalf("5 lines and FlushHeld logged %q, want the first and one counting 4 held back", got)
	}
}
