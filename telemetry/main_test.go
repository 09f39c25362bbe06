package telemetry_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The example runs a pipeline: none of its goroutines may outlive it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
