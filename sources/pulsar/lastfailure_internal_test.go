package pulsar

import (
	"testing"
	"testing/synctest"
	"time"
)

// Guarantee: the cause a failed subscribe is given is a failure the
// client logged since that subscribe began: one logged before it (an
// outage that ended long ago) is not blamed for a later failure.
func TestOnlyAFailureLoggedSinceTheSubscribeBeganIsItsCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := new(lastFailure)
		l.set("Failed to connect to broker.: connection refused")
		time.Sleep(time.Minute)
		began := time.Now()
		if got := l.since(began); got != "" {
			t.Errorf("since a subscribe that began a minute after the last failure: %q, want none", got)
		}
		time.Sleep(time.Second)
		l.set("Failed to perform initial handshake: timeout")
		if got, want := l.since(began), "Failed to perform initial handshake: timeout"; got != want {
			t.Errorf("since a subscribe that began before the failure: %q, want %q", got, want)
		}
		var none *lastFailure
		if got := none.since(began); got != "" {
			t.Errorf("a client that tells no failures: %q, want none", got)
		}
	})
}
