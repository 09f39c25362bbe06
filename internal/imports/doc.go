// Package imports holds the test that keeps the module's import graph
// pointing one way: message and acker at the bottom, then the stage queues,
// the core stages, the pipeline, and the topic glue, sources and examples
// on top, the test that every exported sentinel error names its
// package, and the tests that keep the docs in step with the code (every
// Go name they quote is declared; every test they name exists; every Go
// code block type-checks; the bounds docs/operations.md gives are the
// constants'), and the test that no compiled program or oversized file is
// tracked. It has no code of its own.
package imports
