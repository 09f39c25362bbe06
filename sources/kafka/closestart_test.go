package kafka_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/sources/kafka"
)

// Guarantee: a Close that comes while a Run is still starting its member
// (its clients made, the cluster's first metadata answer not in yet)
// makes that Run return ErrClosed once the cluster answers, with every
// client the start made closed: the member never joins the set Close
// releases, so nothing else would close them.
func TestACloseDuringTheStartLeavesNoClientBehind(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		c := newCluster(t, 1, kfake.NumBrokers(1))
		reached, release := make(chan struct{}), make(chan struct{})
		var reach, rel sync.Once
		c.ControlKey(int16(kmsg.Metadata), func(kmsg.Request) (kmsg.Response, error, bool) {
			reach.Do(func() { close(reached) })
			<-release
			return nil, nil, false
		})
		releaseOnce := func() { rel.Do(func() { close(release) }) }
		defer releaseOnce()
		before := goleak.IgnoreCurrent() // the cluster's
		src := cl.new(t, sourceOptions(c, "g-close-start"))
		opts := pipelineOpts("close-start", src, 1, newLedger(), nil)
		done := make(chan error, 1)
		opts.Producer.Source = onceSource{testSource: src, done: done}
		p := startPipeline(t, opts)
		select {
		case <-reached:
		case <-time.After(10 * time.Second):
			releaseOnce()
			stopPipeline(t, p)
			t.Fatal("the member's start sent no metadata request within 10s")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := src.Close(ctx); err != nil {
			t.Errorf("Close = %v", err)
		}
		releaseOnce()
		select {
		case err := <-done:
			if !errors.Is(err, kafka.ErrClosed) {
				t.Errorf("Run = %v, want ErrClosed", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("Run did not return within 20s of the cluster's answer")
		}
		stopPipeline(t, p)
		goleak.VerifyNone(t, before,
			goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"))
	})
}
