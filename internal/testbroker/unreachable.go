package testbroker

import (
	"testing"

	"github.com/boulevard-go/boulevard/internal/testnet"
)

// Unreachable is a way a Kafka broker cannot be reached: Addr returns an
// address that fails so, and Cause is what sarama's error then says.
type Unreachable struct {
	Name  string
	Addr  func(testing.TB) string
	Cause string
}

// UnreachableKafka are the ways a Kafka broker cannot be reached: one that
// accepts connections and never answers, nothing listening, and something
// other than a broker answering.
var UnreachableKafka = []Unreachable{
	{"silent listener", testnet.SilentListener, "i/o timeout"},
	{"nothing listening", testnet.ClosedPort, "connection refused"},
	{"garbage answer", testnet.GarbageListener, "too large or too small"},
}
