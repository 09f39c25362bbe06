package stagetest_test

import (
	"context"
	"testing"
	"weak"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/internal/stage/stagetest"
	"github.com/boulevard-go/boulevard/internal/wait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// stage is a Runner whose Run returns at once, holding a buffer as a
// stage holds its messages.
type stage struct{ _ [1 << 10]byte }

func (*stage) Run(context.Context) {}

// Guarantee: Go keeps no stage once its Run has returned and the test let
// go of it, so a test running thousands of stages (one per seed) does not
// grow its heap with each.
func TestStagesRunByGoAreCollectedOnceTheTestLetsGo(t *testing.T) {
	ws := make([]weak.Pointer[stage], 100)
	for i := range ws {
		s := new(stage)
		ws[i] = weak.Make(s)
		done := stagetest.Go(t.Context(), s)
		<-done
		if stagetest.Done(s) != done {
			t.Fatal("Done is not the channel Go returned for the stage")
		}
	}
	if live := wait.Reachable(ws); live > 0 {
		t.Fatalf("%d of %d stages whose Run returned are still reachable", live, len(ws))
	}
}
