package producer

import "time"

// State is where a producer stage is in the life of its source.
type State string

// The states of a producer stage. A stage goes from StateStarting to
// StateConnecting when it calls the source's Run, to StateRunning when that
// run creates its first feed, and to StateRestarting when the run fails;
// from there back to StateConnecting when it runs the source again. While a
// run is up, its source may move the stage to StateDegraded and back
// (RunHealth.Degrade, RunHealth.Recovered, through the handle Stage.Health
// gives the run). It ends in StateStopped (the pipeline stopped it, or the
// source was exhausted) or StateFailed (it gave up under Restart's rules).
const (
	// StateStarting: the stage has not called the source's Run yet.
	StateStarting State = "starting"
	// StateConnecting: Run was called and has not created a feed yet: the
	// source has not connected in this run (for a broker source, it is
	// still subscribing or joining its group).
	StateConnecting State = "connecting"
	// StateRunning: the current run has created a feed.
	StateRunning State = "running"
	// StateDegraded: the current run is up, but its source has reported
	// that it cannot read from its broker (RunHealth.Degrade): it cannot
	// reach it, or its consumer group session keeps failing. LastError
	// says why. The stage goes back to StateRunning (StateConnecting when
	// the run has created no feed yet) when the source reports that it
	// reads again (RunHealth.Recovered), and leaves it as any run does
	// when the run ends. The run is not failed, and the time it spends
	// degraded does not count as failing time under Restart's rules.
	StateDegraded State = "degraded"
	// StateRestarting: the last run failed; the stage waits for its backoff
	// (and for the failed run's messages to leave its buffer) before it
	// runs the source again.
	StateRestarting State = "restarting"
	// StateStopped: the source's Run returned for good, because the
	// pipeline is stopping or the source is exhausted.
	StateStopped State = "stopped"
	// StateFailed: the stage gave up on its source (a *RestartError) and
	// stopped the pipeline.
	StateFailed State = "failed"
)

// StageStatus is a snapshot of one producer stage's state, for health
// checks and dashboards.
type StageStatus struct {
	// Stage is the stage's name, "<pipeline>.producer.<index>".
	Stage string
	// State is the stage's state.
	State State
	// Since is when the stage entered State.
	Since time.Time
	// Restarts is how many times the stage has restarted its source after
	// a failure, counting the restart it is waiting for when
	// StateRestarting.
	Restarts int
	// ConsecutiveFailures is how many runs in a row failed without
	// delivering a message (see Restart.MaxConsecutiveFailures); it drops
	// to 0 as soon as a run delivers one.
	ConsecutiveFailures int
	// LastError is the error of the last failed run (nil when none
	// failed), or, from the time the stage last entered StateDegraded,
	// the error its source gave for it (RunHealth.Degrade). It stays set
	// after a recovery; ConsecutiveFailures, and State being
	// StateDegraded, tell whether it is current.
	LastError error
}

// Status returns a snapshot of the stage's state. It takes one short lock
// and allocates nothing: cheap enough to poll.
func (s *Stage[T]) Status() StageStatus {
	s.stMu.Lock()
	defer s.stMu.Unlock()
	return s.status
}

// Status returns a snapshot of every producer stage's state, in stage order
// (none for a push-only pipeline).
func (p *runtime[T]) Status() []StageStatus {
	out := make([]StageStatus, len(p.stages))
	for i, s := range p.stages {
		out[i] = s.Status()
	}
	return out
}

// setState moves the stage to state, now, and lets update change the other
// fields of its status under the same lock.
func (s *Stage[T]) setState(state State, now time.Time, update func(*StageStatus)) {
	s.stMu.Lock()
	defer s.stMu.Unlock()
	s.status.State = state
	s.status.Since = now
	if update != nil {
		update(&s.status)
	}
}
