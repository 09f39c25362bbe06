package franz

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/sources/kafka/internal/claim"
)

const startTopic = "events"

// startCluster starts a one-broker kfake cluster with startTopic (3
// partitions) and returns it with a client of it.
func startCluster(t *testing.T) (*kfake.Cluster, *kgo.Client) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, startTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return c, cl
}

// appendAt writes one record to part, stamped at.
func appendAt(t *testing.T, cl *kgo.Client, part int32, at time.Time) {
	t.Helper()
	r := &kgo.Record{Topic: startTopic, Partition: part, Value: []byte("v"), Timestamp: at}
	if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// seed writes 5+p records an hour old to each partition p, and one more at
// start to partition 2 (offset 7); it returns start.
func seed(t *testing.T, cl *kgo.Client) time.Time {
	t.Helper()
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	for part := range int32(3) {
		for i := range 5 + int(part) {
			appendAt(t, cl, part, base.Add(time.Duration(i)*time.Second))
		}
	}
	start := base.Add(time.Minute)
	appendAt(t, cl, 2, start)
	return start
}

// Guarantee: a record stamped at or after the start time and appended
// after the listing by time found none, but before the end offset is
// listed, is where its partition starts (it is not skipped); a partition
// with no such record starts at its end, and one with such a record from
// the start at that record.
func TestStartOffsetsKeepRecordAppendedDuringLookup(t *testing.T) {
	_, cl := startCluster(t)
	start := seed(t, cl)
	appended := 0
	beforeEndListing = func() {
		appended++
		appendAt(t, cl, 0, start.Add(time.Second)) // offset 5 of partition 0
	}
	t.Cleanup(func() { beforeEndListing = nil })
	tps := []topicPartition{{startTopic, 0}, {startTopic, 1}, {startTopic, 2}}
	got, err := startOffsets(context.Background(), cl, start.UnixMilli(), tps)
	if err != nil {
		t.Fatal(err)
	}
	if appended != 1 {
		t.Fatalf("the end offsets were listed %d times, want once", appended)
	}
	want := map[topicPartition]int64{{startTopic, 0}: 5, {startTopic, 1}: 6, {startTopic, 2}: 7}
	for tp, w := range want {
		if got[tp] != w {
			t.Errorf("partition %d starts at %d, want %d (all: %v)", tp.part, got[tp], w, got)
		}
	}
}

// adjustMember is a member of cl's cluster with the options opts and a
// claim of each partition of startTopic, whose logs go to the returned
// buffer.
func adjustMember(cl *kgo.Client, opts Options) (*member, *bytes.Buffer) {
	var buf bytes.Buffer
	opts.Brokers, _ = cl.OptValue(kgo.SeedBrokers).([]string)
	opts = opts.WithDefaults()
	m := &member{opts: &opts, reset: opts.resetOffset(), parts: make(map[topicPartition]*partition),
		log: slog.New(slog.NewTextHandler(&buf, nil)), ctx: context.Background(), pollCtx: context.Background(), hurryCtx: context.Background(), failed: make(chan error, 1)}
	m.cl.Store(cl)
	for part := range int32(3) {
		p := &partition{m: m, log: slog.New(slog.DiscardHandler)}
		p.Claim = claim.New(claim.Config{Topic: startTopic, Partition: part, Committed: -1, Start: -1})
		m.parts[topicPartition{startTopic, part}] = p
	}
	return m, &buf
}

// Guarantee: with OffsetTimestamp, the fetch offsets adjusted for the
// client start the partitions without a committed offset (and, with
// BeginReset, every partition) at the exact offset resolved for the start
// time, and the claims know that start; a committed partition keeps its
// offset with BeginCommitted. When every new partition needs the lookup
// (BeginReset here), adjust returns their resolved offsets; when some
// start at their committed offset (BeginCommitted), adjust returns at
// once with those, and places the others at offset 0, paused in the
// client, until the lookup moves them to their start (SetOffsets, a no-op
// on this client outside any group) and resumes them.
func TestAdjustStartsAtResolvedOffset(t *testing.T) {
	_, cl := startCluster(t)
	start := seed(t, cl)
	for _, tc := range []struct {
		begin string
		want  map[int32]int64 // partition 1 committed 2
		later bool            // partitions 0 and 2 start once adjust returned
	}{
		{BeginCommitted, map[int32]int64{0: 5, 1: 2, 2: 7}, true},
		{BeginReset, map[int32]int64{0: 5, 1: 6, 2: 7}, false},
	} {
		t.Run(tc.begin, func(t *testing.T) {
			m, _ := adjustMember(cl, Options{InitialOffset: OffsetTimestamp, StartTime: start, BeginOffset: tc.begin})
			committed := kgo.NewOffset().At(2).WithEpoch(0)
			got, err := m.adjust(context.Background(), map[string]map[int32]kgo.Offset{
				startTopic: {0: m.reset, 1: committed, 2: m.reset},
			})
			if err != nil {
				t.Fatal(err)
			}
			if tc.later {
				if paused := cl.PauseFetchPartitions(nil)[startTopic]; len(paused) != 2 {
					t.Errorf("partitions %v paused as adjust returns, want 0 and 2", paused)
				}
				m.wg.Wait() // the lookup adjust left running
				if paused := cl.PauseFetchPartitions(nil); len(paused) != 0 {
					t.Errorf("partitions %v still paused once the lookup ended", paused)
				}
			}
			for part, w := range tc.want {
				wantOff := kgo.NewOffset().At(w)
				switch {
				case part == 1 && tc.begin == BeginCommitted:
					wantOff = committed
				case tc.later:
					wantOff = kgo.NewOffset().At(0)
				}
				if o := got[startTopic][part]; o != wantOff {
					t.Errorf("partition %d fetches from %v, want %v", part, o, wantOff)
				}
				if next := m.parts[topicPartition{startTopic, part}].Next.Load(); next != w {
					t.Errorf("partition %d's claim starts at %d, want %d", part, next, w)
				}
			}
		})
	}
}

// Guarantee: when the start offsets cannot be listed (the cluster refuses
// the first three listings with an error Kafka says to retry), adjust does not leave the lookup to the
// client: it tries again, 1s, 2s and 4s later, on clients of its own,
// logging one WARN line at the first failed attempt and one more at each
// doubling of them (the 1st and the 2nd of three), and once a listing is
// answered the partitions start at the exact offsets resolved, with one
// INFO line saying so.
func TestAdjustTriesAgainWhenListingFails(t *testing.T) {
	c, cl := startCluster(t)
	start := seed(t, cl)
	var refused atomic.Int32
	c.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if refused.Add(1) > 3 {
			c.DropControl()
			return nil, nil, false
		}
		c.KeepControl()
		return testbroker.RefuseListOffsets(req, kerr.LeaderNotAvailable.Code), nil, true
	})
	m, logs := adjustMember(cl, Options{InitialOffset: OffsetTimestamp, StartTime: start, BeginOffset: BeginCommitted})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := m.adjust(ctx, map[string]map[int32]kgo.Offset{startTopic: {0: m.reset, 1: m.reset, 2: m.reset}})
	if err != nil {
		t.Fatal(err)
	}
	for part, w := range map[int32]int64{0: 5, 1: 6, 2: 7} {
		if o := got[startTopic][part]; o != kgo.NewOffset().At(w) {
			t.Errorf("partition %d fetches from %v, want offset %d", part, o, w)
		}
		if next := m.parts[topicPartition{startTopic, part}].Next.Load(); next != w {
			t.Errorf("partition %d's claim starts at %d, want %d", part, next, w)
		}
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 2 {
		t.Errorf("%d WARN lines for three failed attempts, want 2 (the 1st and the 2nd):\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), "level=INFO"); n != 1 {
		t.Errorf("%d INFO lines once the listing was answered, want 1:\n%s", n, logs.String())
	}
}

// Guarantee: a start offset listing the cluster refuses with an error
// Kafka says not to retry (TOPIC_AUTHORIZATION_FAILED) is not tried
// again: the member fails at once with an error wrapping ErrDenied and the
// refusal, whether adjust waits for the lookup (BeginReset: it then
// returns that error and starts no claim) or left it running (a committed
// partition started without it: the claims waiting for it stay paused).
func TestAdjustFailsTheMemberWhenTheListingIsRefusedForGood(t *testing.T) {
	for _, begin := range []string{BeginReset, BeginCommitted} {
		t.Run(begin, func(t *testing.T) {
			c, cl := startCluster(t)
			start := seed(t, cl)
			var listings atomic.Int32
			c.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				listings.Add(1)
				return testbroker.RefuseListOffsets(req, kerr.TopicAuthorizationFailed.Code), nil, true
			})
			m, logs := adjustMember(cl, Options{InitialOffset: OffsetTimestamp, StartTime: start, BeginOffset: begin})
			got, err := m.adjust(context.Background(), map[string]map[int32]kgo.Offset{
				startTopic: {0: m.reset, 1: kgo.NewOffset().At(2).WithEpoch(0), 2: m.reset},
			})
			waited := begin == BeginReset
			if waited && (got != nil || !errors.Is(err, ErrDenied) || !errors.Is(err, kerr.TopicAuthorizationFailed)) {
				t.Fatalf("adjust = %v, %v; want nil and an error wrapping ErrDenied and the refusal", got, err)
			}
			if !waited && err != nil {
				t.Fatalf("adjust = %v, want no error: the lookup goes on after it", err)
			}
			m.wg.Wait()
			select {
			case ferr := <-m.Failed():
				if !errors.Is(ferr, ErrDenied) || !errors.Is(ferr, kerr.TopicAuthorizationFailed) ||
					!strings.Contains(ferr.Error(), "start offsets") {
					t.Fatalf("the member failed with %v, want ErrDenied naming the start offsets and the refusal", ferr)
				}
			default:
				t.Fatal("the member did not fail")
			}
			if n := listings.Load(); n != 1 {
				t.Fatalf("%d listings, want 1: a refusal for good is not tried again", n)
			}
			if !strings.Contains(logs.String(), "level=ERROR") {
				t.Fatalf("no ERROR line for the refusal:\n%s", logs.String())
			}
			for _, part := range []int32{0, 2} {
				if next := m.parts[topicPartition{startTopic, part}].Next.Load(); next != -1 {
					t.Errorf("partition %d's claim starts at %d, want -1 (none)", part, next)
				}
			}
			if paused := cl.PauseFetchPartitions(nil)[startTopic]; !waited && len(paused) != 2 {
				t.Errorf("partitions %v paused, want 0 and 2 (they wait for a start that never comes)", paused)
			}
		})
	}
}

// Guarantee: when the session ends during the start offset lookup (the
// context franz-go gives adjust is cancelled), adjust returns the
// context's error and starts no claim, rather than leave the lookup to
// franz-go's client, whose requests would queue on the member's
// connections.
func TestAdjustEndsWithItsSession(t *testing.T) {
	_, cl := startCluster(t)
	start := seed(t, cl)
	m, logs := adjustMember(cl, Options{InitialOffset: OffsetTimestamp, StartTime: start, BeginOffset: BeginCommitted})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got, err := m.adjust(ctx, map[string]map[int32]kgo.Offset{startTopic: {0: m.reset, 1: m.reset, 2: m.reset}})
	if !errors.Is(err, context.Canceled) || got != nil {
		t.Fatalf("adjust = %v, %v; want nil, context.Canceled", got, err)
	}
	for part := range int32(3) {
		if next := m.parts[topicPartition{startTopic, part}].Next.Load(); next != -1 {
			t.Errorf("partition %d's claim starts at %d, want -1 (none)", part, next)
		}
	}
	if strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("a session that ended is not a failed lookup:\n%s", logs.String())
	}
}
