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
