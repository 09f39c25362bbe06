package kafkatopic_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/within"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
	"github.com/boulevard-go/boulevard/topic/topictest"
)

// Guarantee: NewContext, Backend.NewTopic and Backend.Close return an
// error matching topic.ErrNilContext for a nil context, rather than
// panicking: no backend or topic is made, and Close leaves the backend
// open, still declaring topics.
func TestANilContextIsAnErrorNotAPanic(t *testing.T) {
	var nilCtx context.Context
	o := testOptions[int](testbroker.Kafka(t), topic.IntCodec{})
	err := within.Run(10*time.Second, func() error {
		b, err := kafkatopic.NewContext(nilCtx, o)
		if err == nil {
			_ = b.Close(context.Background())
		}
		return err
	})
	if !errors.Is(err, topic.ErrNilContext) {
		t.Errorf("NewContext(nil ctx) = %v, want an error matching topic.ErrNilContext", err)
	}
	be := newBackend(t, o)
	topictest.NilContextRefused(t, be, be.Close)
}
