package claim

import (
	"context"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// claimSource opens one claim on its stage, says so, and returns when the
// pipeline stops it, which closes the claim's feed.
type claimSource struct {
	c      *Claim
	opened chan struct{}
}

func (s *claimSource) Run(ctx context.Context, stage *producer.Stage[[]byte]) error {
	s.c.Open(stage)
	close(s.opened)
	<-ctx.Done()
	return nil
}

// Guarantee: records a claim delivers to a feed that has closed (the
// pipeline stopped between the claim taking its permits and delivering)
// get no outcome, so the claim does not wait for them: they are forgotten
// as withdrawn records are, and its release returns at once instead of
// after the revoke timeout.
func TestDeliveryToAClosedFeedIsNotWaitedFor(t *testing.T) {
	c := closedClaim(t, "closed-feed")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	Deliver(c, []int64{0, 1, 2}, func(o int64) Record { return Record{Offset: o, Value: []byte("v")} },
		func(dst []Header, _ int64) []Header { return dst })
	if n := c.Pending(); n != 0 {
		t.Fatalf("%d records delivered to a closed feed are waited for, want none", n)
	}
	released := make(chan struct{})
	go func() {
		c.Release(c.log, time.Hour, nil)
		close(released)
	}()
	select {
	case <-released:
	case <-ctx.Done():
		t.Fatal("the claim's release waits for records its closed feed refused")
	}
}

// closedClaim returns a claim opened on the stage of a pipeline named name
// that has since stopped, so the claim's feed is closed.
func closedClaim(t *testing.T, name string) *Claim {
	t.Helper()
	c := New(Config{Topic: "t", Window: 8})
	src := &claimSource{c: c, opened: make(chan struct{})}
	p, err := pipeline.New(pipeline.Options[[]byte, []byte]{
		Name:     name,
		Producer: producer.Options[[]byte]{Source: producer.SourceFunc[[]byte](src.Run)},
		Processors: processor.Options[[]byte, []byte]{
			Handle: func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) { return m.Data, nil },
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-src.opened
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}
