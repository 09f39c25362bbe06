package topic_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: a topic's Stats add up through tracked publishes that are
// acked, nacked or time out (and are acked late, after their timeout),
// mixed with untracked publishes: Published counts every publish once,
// InFlight never goes below 0 nor above the publisher's MaxInFlight and
// is back to 0 once every publish is resolved, a late ack changes
// nothing, each tracked publish reports one outcome, and Published never
// goes down from one reading to the next.
func TestTopicStatsAddUpThroughTrackedPublishesThatTimeOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const tracked, untracked, maxInFlight = 90, 30, 16
		h := newIntTopic(t, topic.Options{})
		sub := subscribeInt(t, h, topic.Balanced("g"))
		p := newTracked(t, h, topic.TrackedOptions{MaxInFlight: maxInFlight, Timeout: time.Second})
		var prev topic.Stats
		read := func(when string) topic.Stats {
			t.Helper()
			st := h.Stats()
			if st.Published < prev.Published || st.InFlight < 0 || st.InFlight > maxInFlight {
				t.Fatalf("%s: %+v after %+v; want Published never going down, InFlight in [0, %d]", when, st, prev, maxInFlight)
			}
			prev = st
			return st
		}
		// The subscriber acks the values ≡ 0 mod 3, nacks those ≡ 1 and
		// leaves those ≡ 2 until their publish timed out, then acks them.
		late := make(chan topic.MessageID, tracked+untracked)
		go func() {
			defer close(late)
			for range tracked + untracked {
				it, err := sub.Receive(t.Context())
				if err != nil {
					t.Errorf("Receive: %v", err)
					return
				}
				switch it.Value % 3 {
				case 0:
					_ = sub.Ack(it.ID)
				case 1:
					_ = sub.Nack(it.ID, errors.New("refused"))
				default:
					late <- it.ID
				}
			}
		}()
		var outcomes outcomeLog
		for v := range tracked + untracked {
			var err error
			if v < tracked {
				err = p.PublishFunc(t.Context(), v, outcomes.done(v))
			} else {
				err = h.Publish(t.Context(), v)
			}
			if err != nil {
				t.Fatal(err)
			}
			read("publishing")
		}
		time.Sleep(2 * time.Second) // past every tracked publish's timeout
		synctest.Wait()
		read("timed out")
		for id := range late {
			_ = sub.Ack(id)
		}
		synctest.Wait()
		st := read("idle")
		if st.Published != tracked+untracked || st.InFlight != 0 || st.Dropped != 0 {
			t.Errorf("idle: %+v; want %d published, none in flight or dropped", st, tracked+untracked)
		}
		if n := p.InFlight(); n != 0 {
			t.Errorf("the publisher has %d publishes in flight once all are resolved", n)
		}
		var count [5]int
		for v := range tracked {
			got := outcomes.of(v)
			if len(got) != 1 {
				t.Fatalf("publish %d reported %v, want one outcome", v, got)
			}
			count[got[0]]++
		}
		if count[topic.Acked]+count[topic.Nacked]+count[topic.TimedOut] != tracked || count[topic.TimedOut] == 0 {
			t.Errorf("outcomes by kind %v, want the %d publishes acked, nacked or timed out, some timed out", count, tracked)
		}
	})
}
