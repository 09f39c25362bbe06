package source_test

import (
	"context"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/within"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/source"
)

// nilCtx is the nil context the calls below are given.
var nilCtx context.Context

// Guarantee: NewContext, Run and Close return an error matching
// topic.ErrNilContext for a nil context, rather than panicking:
// NewContext subscribes nothing, Run receives nothing, and Close leaves
// the source open, to be closed again with a context.
func TestANilContextIsAnErrorNotAPanic(t *testing.T) {
	h, err := topic.NewTopic[int]("t", topic.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	src, err := source.New(source.Options[int]{Topic: h, Mode: topic.Balanced("g")})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close(context.Background())
	calls := []within.Call{
		{Name: "NewContext", F: func() error {
			_, err := source.NewContext(nilCtx, source.Options[int]{Topic: h, Mode: topic.Balanced("other")})
			return err
		}},
		{Name: "Run", F: func() error { return src.Run(nilCtx, new(producer.Stage[int])) }},
		{Name: "Close", F: func() error { return src.Close(nilCtx) }},
	}
	within.Refused(t, 5*time.Second, topic.ErrNilContext, calls...)
	if st := h.Stats(); st.BalancedGroups != 1 {
		t.Errorf("%d balanced groups after the nil-context calls, want the source's 1", st.BalancedGroups)
	}
	// Close(nil) left the source open: a Run through a stage still
	// subscribes, rather than finding the source closed.
	if err := src.Close(context.Background()); err != nil {
		t.Errorf("Close after Close(nil) = %v, want nil", err)
	}
}
