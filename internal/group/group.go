// Package group launches goroutines and waits for all of them: the one owner
// of a pipeline's goroutines and of each stage's workers, in the manner of
// golang.org/x/sync/errgroup. Unlike errgroup it neither collects errors nor
// cancels anything: a stage that fails reports it to the pipeline, which
// decides whether to drain or to stop, and every goroutine returns when its
// own context or input says so.
package group

import "sync"

// Group is a set of goroutines started with Go and awaited with Wait. The
// zero value is ready to use. A Group must not be copied after first use.
type Group struct {
	wg sync.WaitGroup
}

// Go runs f in a new goroutine that Wait waits for. It may be called
// concurrently with Wait as long as the group is not yet empty.
func (g *Group) Go(f func()) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		f()
	}()
}

// Wait blocks until every goroutine started with Go has returned.
func (g *Group) Wait() { g.wg.Wait() }
