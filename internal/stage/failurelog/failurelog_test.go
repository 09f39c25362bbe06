package failurelog

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/logburst"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/message"
)

// kind is a kind of failure line with the level and the message its
// lines are documented to have.
type kind struct {
	k     *logburst.Kind
	level slog.Level
	msg   string
}

// kinds returns each kind of l.
func kinds(l *Lines) []kind {
	return []kind{
		{&l.Failed, slog.LevelWarn, "message failed"},
		{&l.Panicked, slog.LevelError, "handler panicked; message failed"},
		{&l.Prepare, slog.LevelWarn, "prepare failed; failing the whole chunk"},
		{&l.PartitionBy, slog.LevelError, "PartitionBy panicked; message failed"},
		{&l.Weight, slog.LevelError, "Weight panicked; message failed"},
		{&l.BatchFailed, slog.LevelWarn, "batch handler failed the batch"},
		{&l.BatchPanicked, slog.LevelError, "batch handler panicked; failing the whole batch"},
		{&l.Interrupted, slog.LevelInfo, InterruptedLog},
		{&l.BatchInterrupted, slog.LevelInfo, BatchInterruptedLog},
	}
}

// Guarantee: each kind of failure line is logged at its documented level
// (WARN for a failure, ERROR for a panic, INFO for a cut by the shutdown)
// with its own message, and every one is logged when New is given a
// negative interval.
func TestEachFailureLineHasItsLevelAndMessage(t *testing.T) {
	var lines logtest.Lines
	log := slog.New(slog.NewTextHandler(&lines, &slog.HandlerOptions{Level: slog.LevelDebug}))
	l := New(-1)
	for _, c := range kinds(l) {
		c.k.Line(context.Background(), log)
		c.k.Line(context.Background(), log)
		lines.Want(t, 2, c.msg, "level="+c.level.String()+" ", "msg="+strconv.Quote(c.msg)+"\n")
	}
}

// Guarantee: a stage's failure lines hold like lines back for the
// interval New is given, and Flush says, once per kind, how many each
// held back, at the kind's level; a second Flush says nothing more.
func TestFlushCountsTheLinesEachKindHeldBackOnce(t *testing.T) {
	var lines logtest.Lines
	log := slog.New(slog.NewTextHandler(&lines, &slog.HandlerOptions{Level: slog.LevelDebug}))
	l := New(time.Hour)
	for i, c := range kinds(l) {
		for range 2 + i {
			c.k.Line(context.Background(), log)
		}
	}
	l.Flush(context.Background(), log)
	l.Flush(context.Background(), log)
	for i, c := range kinds(l) {
		lines.Want(t, 1, c.msg+" held back", "level="+c.level.String()+" ",
			"msg="+strconv.Quote(c.msg+logburst.HeldBackSuffix), logburst.HeldBackKey+"="+strconv.Itoa(1+i)+"\n")
	}
	if n := len(lines.All()); n != 2*len(kinds(l)) {
		t.Fatalf("%d lines, want one per kind and one flushed per kind:\n%s", n, strings.Join(lines.All(), ""))
	}
}

// Guarantee: a failure line shows the failed message as it logs itself,
// but for its error, which the line carries once on its own.
func TestAFailureLineShowsTheMessageWithoutItsError(t *testing.T) {
	m := message.New("payload", nil, 7)
	m.Fail(errors.New("store down"))
	var lines logtest.Lines
	slog.New(slog.NewTextHandler(&lines, nil)).Warn("message failed", slog.Any("message", Failed(m)), slog.Any("error", m.Err()))
	line := strings.Join(lines.All(), "")
	if !strings.Contains(line, "message.id=7 message.status=failed") || strings.Count(line, "store down") != 1 {
		t.Fatalf("line %q, want the message's id and status, and its error once", line)
	}
}
