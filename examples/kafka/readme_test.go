package main

import (
	"testing"

	"github.com/boulevard-go/boulevard/examples/internal/exampletest"
)

// Guarantee: the flags table of the example's README lists exactly the
// flags the program has, each with the default -h gives it, so that a user
// who runs the example from its README finds every flag it takes.
func TestReadmeListsEveryFlagWithItsDefault(t *testing.T) {
	exampletest.CheckReadmeFlags(t, "README.md")
}
