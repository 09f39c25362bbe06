//go:build !race

package testbroker

// RaceDetector reports whether the tests were built with -race: with it,
// the Pulsar fault tests cut no producer's connection, for the data race
// pulsar-client-go (v0.21.0) has in its producer's reconnect path.
const RaceDetector = false
