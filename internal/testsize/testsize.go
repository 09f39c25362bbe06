// Package testsize sizes the tests that grow with an environment variable:
// short by default, longer when asked (for example
// BOULEVARD_SOAK_ROUNDS=200 go test ./pipeline).
package testsize

import (
	"os"
	"strconv"
	"testing"
)

// Count is the positive number the environment variable env holds, or,
// when it is unset, short under -short and def otherwise. A value that is
// not a positive number fails the test.
func Count(t testing.TB, env string, short, def int) int {
	t.Helper()
	if s := os.Getenv(env); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", env, s)
		}
		return n
	}
	if testing.Short() {
		return short
	}
	return def
}
