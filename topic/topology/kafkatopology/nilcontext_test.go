package kafkatopology

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/within"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: NewContext returns an error matching topology.ErrNilContext
// for a nil context, rather than panicking, and makes no backend. (The
// backend's own calls are held to it by the topologytest suite.)
func TestANilContextIsAnErrorNotAPanic(t *testing.T) {
	var nilCtx context.Context
	o := connectOptions(testbroker.Kafka(t).ListenAddrs()...)
	err := within.Run(10*time.Second, func() error {
		b, err := NewContext(nilCtx, o)
		if err == nil {
			_ = b.Close(context.Background())
		}
		return err
	})
	if !errors.Is(err, topology.ErrNilContext) {
		t.Errorf("NewContext(nil ctx) = %v, want an error matching topology.ErrNilContext", err)
	}
}
