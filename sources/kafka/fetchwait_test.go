package kafka_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/sources/kafka/franz"
)

// Guarantee: the franz-go source's fetches ask the broker to wait at most
// franz.DefaultFetchMaxWait (sarama's 500ms) for data, not franz-go's own
// 5s, unless its ClientOptions set kgo.FetchMaxWait: a partition the
// source paused while its processors were stalled, then resumed, joins
// the next fetch, which a broker holding a long wait for the member's
// caught-up partitions would otherwise delay by seconds while the
// partition's backlog waits.
func TestFranzFetchesWaitAtMostTheDefaultFetchMaxWait(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []kgo.Opt
		want time.Duration
	}{
		{"default", nil, franz.DefaultFetchMaxWait},
		{"ClientOptions", []kgo.Opt{kgo.FetchMaxWait(1500 * time.Millisecond)}, 1500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 2)
			var mu sync.Mutex
			waits := map[int32]int{} // fetch requests by the wait they ask for, in ms
			c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				mu.Lock()
				waits[req.(*kmsg.FetchRequest).MaxWaitMillis]++
				mu.Unlock()
				return nil, nil, false
			})
			sent := produce(t, c, 2, 0, 20)
			fo := franzOptions(sourceOptions(c, "g-fetchwait"))
			// franz-go's own group timeouts, and no fetch wait but tc's.
			fo.ClientOptions = tc.opts
			src, err := franz.New(fo)
			if err != nil {
				t.Fatal(err)
			}
			l := newLedger()
			p := startPipeline(t, pipelineOpts("fetchwait", src, 1, l, nil))
			defer stopPipeline(t, p)
			wait.Within(t, 30*time.Second, "every record handled", func() bool { return l.covers(sent) })
			// The partitions are caught up: the next fetches wait.
			wait.Within(t, 30*time.Second, "two fetches of caught-up partitions", func() bool {
				mu.Lock()
				defer mu.Unlock()
				n := 0
				for _, k := range waits {
					n += k
				}
				return n >= 4
			}, func() string { mu.Lock(); defer mu.Unlock(); return fmt.Sprint(waits) })
			mu.Lock()
			defer mu.Unlock()
			want := int32(tc.want / time.Millisecond)
			for ms, n := range waits {
				if ms != want {
					t.Errorf("%d fetch requests asked the broker to wait up to %d ms, want %d ms (all: %v)", n, ms, want, waits)
				}
			}
		})
	}
}
