package pulsar

import (
	"errors"
	"log/slog"
	"testing"

	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/boulevard-go/boulevard/internal/logtest"
)

// Guarantee: every line pulsar-client-go writes through a client made
// with a Logger of the caller's reaches that Logger and NewClient's
// watching logger alike, whichever way the client writes it: at each
// level, formatted or not, with fields, a field or an error, and through
// a sub-logger.
func TestTeeLoggerHandsEveryLineToBoth(t *testing.T) {
	var own, watch logtest.Records
	l := teeLogger{tee[plog.Logger]{plog.NewLoggerWithSlog(slog.New(&own)), plog.NewLoggerWithSlog(slog.New(&watch))}}
	sub := l.SubLogger(plog.Fields{"topic": "orders"})
	entries := []plog.Entry{
		l.WithFields(plog.Fields{"a": 1}), l.WithField("b", 2), l.WithError(errors.New("refused")),
		sub.WithFields(plog.Fields{"c": 3}).WithField("d", 4),
	}
	writers := []lineWriter{l, sub}
	for _, e := range entries {
		writers = append(writers, e)
	}
	for _, w := range writers {
		w.Debug("line")
		w.Info("line")
		w.Warn("line")
		w.Error("line")
		w.Debugf("%s", "line")
		w.Infof("%s", "line")
		w.Warnf("%s", "line")
		w.Errorf("%s", "line")
	}
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError} {
		want := 2 * len(writers)
		if n, m := own.Count(level, "line"), watch.Count(level, "line"); n != want || m != want {
			t.Errorf("%v lines: the caller's Logger got %d, the watching one %d; want %d each", level, n, m, want)
		}
	}
}
