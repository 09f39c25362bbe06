package producer_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/within"
	"github.com/boulevard-go/boulevard/producer"
)

// nilCtx is the nil context the calls below are given.
var nilCtx context.Context

// Guarantee: Feed.Acquire returns ErrNilContext for a nil context, rather
// than panicking, and takes no permit, whether the feed has permits or
// none.
func TestANilContextIsAnErrorNotAPanic(t *testing.T) {
	got := make(chan error, 4)
	src := producer.SourceFunc[item](func(ctx context.Context, st *producer.Stage[item]) error {
		f := st.NewFeed("f", nil)
		acquire := func() error { _, err := f.Acquire(nilCtx, 1); return err }
		got <- within.Run(5*time.Second, acquire)
		if n := f.TryAcquire(1000); n != producer.DefaultFlowInitial {
			got <- fmt.Errorf("TryAcquire after Acquire(nil) took %d permits, want all %d", n, producer.DefaultFlowInitial)
		} else {
			got <- nil
		}
		got <- within.Run(5*time.Second, acquire)
		<-ctx.Done()
		return nil
	})
	h := start(t, "nilctx", producer.Options[item]{Source: src}, newRecorder(), nil)
	for _, what := range []string{"Acquire(nil) with permits", "the permits after it", "Acquire(nil) without permits"} {
		err := <-got
		if what == "the permits after it" {
			if err != nil {
				t.Error(err)
			}
			continue
		}
		if !errors.Is(err, producer.ErrNilContext) {
			t.Errorf("%s = %v, want ErrNilContext", what, err)
		}
	}
	h.p.StopFetching()
	waitDone(t, h)
}
