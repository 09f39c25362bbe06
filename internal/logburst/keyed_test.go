package logburst_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/internal/logburst"
	"github.com/boulevard-go/boulevard/internal/logtest"
)

const undecodable = "record does not decode"

func keyed(lines *logtest.Lines) *logburst.Keyed[int32] {
	return &logburst.Keyed[int32]{Log: logger(lines), Level: slog.LevelWarn, Msg: undecodable}
}

// part logs the line of partition p's record at offset off.
func part(kd *logburst.Keyed[int32], p int32, off int64) {
	kd.Line(context.Background(), p, []slog.Attr{slog.Int("partition", int(p))}, slog.Int64Value(off), slog.Int64("offset", off))
}

// Guarantee: a burst of like lines of one key within the interval is one
// line; the next line after the interval counts the ones held back and
// names the first and the last position held back.
func TestAKeyedBurstIsOneLineAndTheNextNamesWhereItWas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lines logtest.Lines
		kd := keyed(&lines)
		for off := range int64(200) {
			part(kd, 3, 100+off)
		}
		got := lines.All()
		if len(got) != 1 || !strings.Contains(got[0], "partition=3 offset=100") || strings.Contains(got[0], logburst.HeldBackKey) {
			t.Fatalf("a burst of 200 logged %q, want the first line alone", got)
		}
		time.Sleep(logburst.Interval)
		part(kd, 3, 400)
		got = lines.All()
		if len(got) != 2 || !strings.Contains(got[1], "partition=3 offset=400 held_back=199 held_back_first=101 held_back_last=299") {
			t.Fatalf("the line after the interval: %q, want offset 400 counting 199 held back from 101 to 299", got)
		}
		part(kd, 3, 401)
		time.Sleep(logburst.Interval)
		part(kd, 3, 402)
		if got = lines.All(); len(got) != 3 || !strings.Contains(got[2], "offset=402 held_back=1 held_back_first=401 held_back_last=401") {
			t.Fatalf("the line after a second interval: %q, want offset 402 counting 401 alone", got)
		}
	})
}

// Guarantee: the keys of a Keyed are held back each on its own: a burst of
// one does not hold back the first line of another.
func TestKeysAreHeldBackIndependently(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lines logtest.Lines
		kd := keyed(&lines)
		for off := range int64(50) {
			part(kd, 0, off)
			part(kd, 1, 1000+off)
		}
		if got := lines.All(); len(got) != 2 || !strings.Contains(got[0], "partition=0 offset=0") || !strings.Contains(got[1], "partition=1 offset=1000") {
			t.Fatalf("bursts on two partitions logged %q, want the first line of each", got)
		}
		time.Sleep(logburst.Interval)
		part(kd, 1, 2000)
		got := lines.All()
		if len(got) != 3 || !strings.Contains(got[2], "partition=1 offset=2000 held_back=49 held_back_first=1001 held_back_last=1049") {
			t.Fatalf("partition 1 after the interval: %q, want its own 49 held back", got)
		}
	})
}

// Guarantee: Flush says, once per key, what each key still holds back, with
// the key's attributes and its positions, and the next line of a key is
// then logged at once; Forget does the same for one key.
func TestFlushAndForgetSayWhatIsHeldBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lines logtest.Lines
		kd := keyed(&lines)
		ctx := context.Background()
		for off := range int64(10) {
			part(kd, 0, off)
			part(kd, 1, 100+off)
			part(kd, 2, 200+off)
		}
		part(kd, 3, 300) // nothing held back
		kd.Forget(ctx, 2)
		kd.Forget(ctx, 2)
		held := `msg="` + undecodable + logburst.HeldBackSuffix + `"`
		lines.Want(t, 1, "lines of partition 2 forgotten", held, "partition=2 held_back=9 held_back_first=201 held_back_last=209")
		kd.Flush(ctx)
		kd.Flush(ctx)
		lines.Want(t, 1, "lines of partition 0 flushed", held, "partition=0 held_back=9 held_back_first=1 held_back_last=9")
		lines.Want(t, 1, "lines of partition 1 flushed", held, "partition=1 held_back=9 held_back_first=101 held_back_last=109")
		lines.Want(t, 3, "lines saying what was held back", held)
		lines.Want(t, 7, "lines in all", "level=WARN")
		part(kd, 0, 10)
		lines.Want(t, 1, "first lines after Flush", "partition=0 offset=10")
	})
}

// Guarantee: a Keyed keeps at most Max keys: a line of a new key past it
// forgets the key whose last line is the oldest, after saying what it held
// back, so that keys that vary without end do not grow its memory.
func TestKeyedKeepsAtMostMaxKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lines logtest.Lines
		kd := keyed(&lines)
		kd.Max = 4
		for p := range int32(4) {
			part(kd, p, 0)
			part(kd, p, 1)
			time.Sleep(time.Second)
		}
		part(kd, 4, 0) // partition 0 is forgotten
		lines.Want(t, 1, "lines saying what partition 0 held back", undecodable+logburst.HeldBackSuffix, "partition=0 held_back=1")
		part(kd, 0, 2) // partition 1 is forgotten, partition 0 logged at once
		lines.Want(t, 1, "lines of partition 0 at offset 2", "partition=0 offset=2")
		lines.Want(t, 1, "lines saying what partition 1 held back", "partition=1 held_back=1")
		part(kd, 3, 2) // still kept: held back
		lines.Want(t, 0, "lines of partition 3 at offset 2", "offset=2", "partition=3")
		for p := range int32(10_000) {
			part(kd, 10+p, 0)
		}
		kd.Flush(context.Background())
		lines.Want(t, 1, "lines saying what partition 3 held back", "partition=3 held_back=2 held_back_first=1 held_back_last=2")
	})
}

// Guarantee: a Keyed without Max keeps MaxKeys keys: the first key past
// them, and not one before, forgets one, saying what it held back.
func TestAKeyedWithoutMaxKeepsMaxKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lines logtest.Lines
		kd := keyed(&lines)
		for p := range int32(logburst.MaxKeys) {
			part(kd, p, 0)
			part(kd, p, 1)
		}
		if n := lines.Count(logburst.HeldBackSuffix); n != 0 {
			t.Fatalf("%d keys forgotten among MaxKeys (%d), want none", n, logburst.MaxKeys)
		}
		part(kd, logburst.MaxKeys, 0)
		if n := lines.Count(logburst.HeldBackSuffix, "held_back=1"); n != 1 {
			t.Fatalf("%d keys forgotten by the one past MaxKeys (%d), want 1", n, logburst.MaxKeys)
		}
	})
}

// Guarantee: a Keyed whose Every is negative logs every line.
func TestANegativeEveryLogsEveryKeyedLine(t *testing.T) {
	var lines logtest.Lines
	kd := keyed(&lines)
	kd.Every = -1
	for off := range int64(100) {
		part(kd, 0, off)
	}
	kd.Flush(context.Background())
	if got := lines.All(); len(got) != 100 || len(lines.Matching(logburst.HeldBackKey)) > 0 {
		t.Fatalf("%d lines for 100, want 100 and none held back", len(got))
	}
}
