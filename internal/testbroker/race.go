//go:build race

package testbroker

// RaceDetector reports whether the tests were built with -race.
// pulsar-client-go (v0.21.0) has a data race in its producer's reconnect
// path (grabCnx writes fields its send loop reads), which -race reports
// once a producer that has sent reconnects: the Pulsar fault tests then
// cut no producer's connection, and publish through the broker's API
// instead where they must.
const RaceDetector = true
