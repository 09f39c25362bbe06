// Package goexit lets a backend's reader goroutine go on after user code
// it calls (a codec's Decode) ended that goroutine with runtime.Goexit, as
// t.FailNow does. No recover stops an exit: the goroutine runs its
// deferred calls and ends. Resume catches it in a deferred check (one per
// call of the loop, nothing per record) and goes on with the loop on a new
// goroutine, which the ending one waits for, so that what its caller
// defers (a wait group's Done, a claim's release) still runs after the
// loop is over.
package goexit

import "runtime/debug"

// Resume calls body. If body ends its goroutine with runtime.Goexit,
// Resume calls exited with the stack of the exit: exited settles what the
// exit interrupted (the record being decoded) and reports whether the exit
// came from user code and body may go on. If so, body is called again, on
// a new goroutine that the ending one waits for (and again after each
// exit); if not, the goroutine ends. exited is also called when body
// panics; it must then report false (the panic goes on), which it does
// when the panic did not come from the user code it watches (whose panics
// the callers recover).
func Resume(body func(), exited func(stack string) bool) {
	returned := false
	defer func() {
		if returned || !exited(string(debug.Stack())) {
			return
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			Resume(body, exited)
		}()
		<-done
	}()
	body()
	returned = true
}
