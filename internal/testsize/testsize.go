// Package testsize sizes the tests that grow with an environment variable:
// short by default, longer when asked (for example
// BOULEVARD_SOAK_ROUNDS=200 go test ./pipeline).
package testsize

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"testing/synctest"
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

// Seeds runs run once for each seed from 0 to n-1, as the subtest
// "seed=N", inside a synctest bubble (fake time, goroutines waited for),
// with rng made from the seed: a failing seed runs again alone with
// -run 'Test/seed=N'.
func Seeds(t *testing.T, n int, run func(t *testing.T, seed uint64, rng *rand.Rand)) {
	t.Helper()
	for seed := range uint64(n) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { run(t, seed, rand.New(rand.NewPCG(seed, 0))) })
		})
	}
}
