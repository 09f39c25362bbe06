package producer

import (
	"errors"
	"log/slog"
	"time"
)

// ErrUnreachable is the error a stage records as LastError when its source
// calls RunHealth.Degrade with a nil error.
var ErrUnreachable = errors.New("producer: the source cannot read from its broker")

// DegradedLog is the message of the warning a stage logs when its source
// reports that it cannot read from its broker (RunHealth.Degrade).
const DegradedLog = "source cannot read from its broker; stage degraded"

// RecoveredLog is the message of the line a stage logs when its source,
// degraded, reports that it reads again (RunHealth.Recovered); its "state"
// says where the stage went back to (running, or connecting).
const RecoveredLog = "source reads from its broker again; stage no longer degraded"

// RunHealth is how one run of a source reports that it cannot read from
// its broker, and that it reads again: Stage.Health returns it. Its
// reports apply to the run that obtained it and to no other. Once that
// Run has returned they do nothing: they neither change the stage's state
// nor its LastError, and log nothing. A goroutine the run left behind
// therefore cannot degrade the stage's next run, nor end that run's
// degrade. The zero RunHealth, and a nil one, report nothing.
type RunHealth struct {
	stage   healthReporter
	attempt int // the stage's run the handle belongs to; 0 for none
}

// healthReporter is the stage a RunHealth reports to.
type healthReporter interface {
	degrade(attempt int, err error)
	recovered(attempt int)
}

// Health returns the current run's RunHealth. A source calls it within
// its Run, and hands the handle to the goroutines that watch its broker:
// the handle stays bound to that run. Called while no Run is up (from a
// goroutine that outlived its run, once the stage is between runs or
// stopped), it returns a handle that reports nothing. Health never
// blocks and is safe to call from any goroutine.
func (s *Stage[T]) Health() *RunHealth {
	h := &RunHealth{stage: s}
	s.mu.Lock()
	if s.running {
		h.attempt = s.attempt
	}
	s.mu.Unlock()
	return h
}

// Degrade reports that the handle's run is up but cannot read from its
// broker: its client cannot reach it, or its consumer group session keeps
// failing, and is trying again by itself. err says why (nil records
// ErrUnreachable). The stage moves to StateDegraded, with err as its
// LastError, and logs DegradedLog at WARN; a Degrade while degraded only
// updates LastError, and logs nothing, so a source may call it at each
// failed attempt. The source calls Recovered once it reads again.
//
// Degrade is for an outage the source rides out within its run; a source
// that gives up returns an error from Run instead, and the stage restarts
// it. Once the handle's run has returned Degrade does nothing. It never
// blocks and is safe to call from any goroutine.
func (h *RunHealth) Degrade(err error) {
	if h == nil || h.stage == nil {
		return
	}
	if err == nil {
		err = ErrUnreachable
	}
	h.stage.degrade(h.attempt, err)
}

// Recovered reports that the handle's run, which had called Degrade, reads
// from its broker again. The stage goes back to StateRunning
// (StateConnecting when the run has created no feed yet) and logs
// RecoveredLog at INFO, with that state and how long it was degraded. On a
// stage that is not degraded it does nothing, so a source may call it at
// each success; once the handle's run has returned it does nothing either.
// It never blocks and is safe to call from any goroutine.
func (h *RunHealth) Recovered() {
	if h == nil || h.stage == nil {
		return
	}
	h.stage.recovered(h.attempt)
}

// currentLocked reports whether attempt is the run that is up. The caller
// holds s.mu.
func (s *Stage[T]) currentLocked(attempt int) bool {
	return s.running && s.attempt == attempt
}

// degrade is RunHealth.Degrade for the stage's run attempt.
func (s *Stage[T]) degrade(attempt int, err error) {
	s.mu.Lock()
	if !s.currentLocked(attempt) {
		s.mu.Unlock()
		return
	}
	s.stMu.Lock()
	was := s.status.State == StateDegraded
	if !was {
		s.status.State, s.status.Since = StateDegraded, time.Now()
	}
	s.status.LastError = err
	s.stMu.Unlock()
	s.mu.Unlock()
	if !was {
		s.log.Warn(DegradedLog, slog.Any("error", err))
	}
}

// recovered is RunHealth.Recovered for the stage's run attempt.
func (s *Stage[T]) recovered(attempt int) {
	s.mu.Lock()
	if !s.currentLocked(attempt) {
		s.mu.Unlock()
		return
	}
	s.stMu.Lock()
	if s.status.State != StateDegraded {
		s.stMu.Unlock()
		s.mu.Unlock()
		return
	}
	now := time.Now()
	degraded := now.Sub(s.status.Since)
	s.status.State, s.status.Since = StateRunning, now
	if s.connectedAt.IsZero() {
		s.status.State = StateConnecting
	}
	state := s.status.State
	s.stMu.Unlock()
	s.mu.Unlock()
	s.log.Info(RecoveredLog, slog.String("state", string(state)), slog.Duration("degraded", degraded))
}
