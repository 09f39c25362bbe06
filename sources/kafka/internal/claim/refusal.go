package claim

// FailureRun picks which of a fetcher's failures to log, so that one
// whose fetches keep failing the same way logs one line, not one per
// fetch. It is for one goroutine; the zero value is ready.
type FailureRun struct {
	msg  string
	at   int64
	seen bool
}

// Log reports whether err, a failed fetch of a fetcher at progress at
// (a count or an offset that moves when the fetcher hands records over),
// starts a run of failures and is to be logged: the first failure, one
// with another message than the run's, or one after the fetcher handed
// records over since the run's last failure (at moved).
func (r *FailureRun) Log(err error, at int64) bool {
	msg := err.Error()
	if r.seen && r.msg == msg && r.at == at {
		return false
	}
	r.msg, r.at, r.seen = msg, at, true
	return true
}
