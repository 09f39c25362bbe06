// Package imports holds the test that keeps the module's import graph
// pointing one way: message and acker at the bottom, then the stage queues,
// the core stages, the pipeline, and the topic glue, sources and examples
// on top. It has no code of its own.
package imports
