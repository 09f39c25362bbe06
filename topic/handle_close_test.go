package topic_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: a Handle's Close called while another Close of it is under
// way returns only once that closing is done: here, once the done callback
// of a tracked publish that the closing resolves has returned.
func TestAHandleClosedTwiceReturnsOnlyOnceTheClosingIsDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newIntTopic(t, topic.Options{Mode: topic.BalancedOnly})
		subscribeInt(t, h, topic.Balanced("g"))
		p, err := h.Tracked(topic.TrackedOptions{Timeout: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		gate := make(chan struct{})
		reported := make(chan topic.Result, 1)
		if err := p.PublishFunc(t.Context(), 1, func(r topic.Result) {
			reported <- r
			<-gate
		}); err != nil {
			t.Fatal(err)
		}
		first, second := make(chan struct{}), make(chan struct{})
		go func() { h.Close(); close(first) }()
		<-reported // the closing resolved the publish; its callback waits
		go func() { h.Close(); close(second) }()
		synctest.Wait()
		select {
		case <-second:
			t.Error("the second Close returned while the first was still closing (a done callback had not returned)")
		default:
		}
		close(gate)
		<-first
		<-second
	})
}
