package pulsar

import plog "github.com/apache/pulsar-client-go/pulsar/log"

// teeLogger hands each of pulsar-client-go's lines to two loggers: the
// caller's, as the client writes it, and one of NewClient's that reads
// it for the client's reconnections (see lastFailure) and writes nothing.
type teeLogger struct{ tee[plog.Logger] }

func (t teeLogger) SubLogger(f plog.Fields) plog.Logger {
	return teeLogger{tee[plog.Logger]{t.own.SubLogger(f), t.watch.SubLogger(f)}}
}

func (t teeLogger) WithFields(f plog.Fields) plog.Entry {
	return teeEntry{tee[plog.Entry]{t.own.WithFields(f), t.watch.WithFields(f)}}
}

func (t teeLogger) WithField(name string, v any) plog.Entry {
	return teeEntry{tee[plog.Entry]{t.own.WithField(name, v), t.watch.WithField(name, v)}}
}

func (t teeLogger) WithError(err error) plog.Entry {
	return teeEntry{tee[plog.Entry]{t.own.WithError(err), t.watch.WithError(err)}}
}

// teeEntry is teeLogger's Entry: a line with fields, for both loggers.
type teeEntry struct{ tee[plog.Entry] }

func (t teeEntry) WithFields(f plog.Fields) plog.Entry {
	return teeEntry{tee[plog.Entry]{t.own.WithFields(f), t.watch.WithFields(f)}}
}

func (t teeEntry) WithField(name string, v any) plog.Entry {
	return teeEntry{tee[plog.Entry]{t.own.WithField(name, v), t.watch.WithField(name, v)}}
}

// lineWriter is what a pulsar-client-go Logger and Entry both write
// lines with.
type lineWriter interface {
	Debug(args ...any)
	Info(args ...any)
	Warn(args ...any)
	Error(args ...any)
	Debugf(format string, args ...any)
	Infof(format string, args ...any)
	Warnf(format string, args ...any)
	Errorf(format string, args ...any)
}

// tee writes each line to own, then to watch.
type tee[W lineWriter] struct{ own, watch W }

func (t tee[W]) Debug(args ...any) { t.own.Debug(args...); t.watch.Debug(args...) }
func (t tee[W]) Info(args ...any)  { t.own.Info(args...); t.watch.Info(args...) }
func (t tee[W]) Warn(args ...any)  { t.own.Warn(args...); t.watch.Warn(args...) }
func (t tee[W]) Error(args ...any) { t.own.Error(args...); t.watch.Error(args...) }

func (t tee[W]) Debugf(format string, args ...any) {
	t.own.Debugf(format, args...)
	t.watch.Debugf(format, args...)
}

func (t tee[W]) Infof(format string, args ...any) {
	t.own.Infof(format, args...)
	t.watch.Infof(format, args...)
}

func (t tee[W]) Warnf(format string, args ...any) {
	t.own.Warnf(format, args...)
	t.watch.Warnf(format, args...)
}

func (t tee[W]) Errorf(format string, args ...any) {
	t.own.Errorf(format, args...)
	t.watch.Errorf(format, args...)
}
