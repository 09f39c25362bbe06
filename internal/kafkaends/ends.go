// Package kafkaends lists the log ends of the Kafka partitions a backend
// reads, for the high-water marks of its figures: a consumer that does
// not fetch (its buffer full, its partition paused) learns of no record
// produced meanwhile from its fetches.
package kafkaends

import (
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// Partition is a partition of a topic.
type Partition struct {
	Topic string
	Part  int32
}

// Ends are the log ends of the partitions read, as the brokers listed
// them last.
type Ends struct {
	mu sync.Mutex
	m  map[Partition]int64
}

// End returns the log end listed last for partition part of topic, 0 if
// none.
func (l *Ends) End(topic string, part int32) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m[Partition{topic, part}]
}

// Keep sets the listed ends to those of read, the partitions read now:
// a partition's newly listed end from got, or the end listed before for
// one whose listing failed.
func (l *Ends) Keep(read []Partition, got map[Partition]int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := make(map[Partition]int64, len(read))
	for _, k := range read {
		if end, ok := got[k]; ok {
			m[k] = end
		} else if end, ok := l.m[k]; ok {
			m[k] = end
		}
	}
	l.m = m
}

// Lister asks the leaders of partitions for their log ends.
type Lister struct {
	Client  sarama.Client
	Version sarama.KafkaVersion
	// Log takes the DEBUG lines of failed listings, each message prefixed
	// with Prefix ("kafkatopology: ").
	Log    *slog.Logger
	Prefix string
	// Clean takes credentials out of an error before it is logged.
	Clean func(error) error
}

// Run lists the log ends of the partitions read returns into ends every
// interval until stop is closed.
func (l *Lister) Run(ends *Ends, interval time.Duration, read func() []Partition, stop <-chan struct{}) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		rd := read()
		ends.Keep(rd, l.List(rd))
	}
}

// staleLeader reports whether err, a partition's answer to a listing,
// says that the broker asked no longer leads it (or that its leader is
// not known yet): the client's metadata is stale.
func staleLeader(err error) bool {
	return errors.Is(err, sarama.ErrNotLeaderForPartition) ||
		errors.Is(err, sarama.ErrUnknownTopicOrPartition) ||
		errors.Is(err, sarama.ErrLeaderNotAvailable)
}

// List asks the leaders of the partitions read for their log ends, in one
// ListOffsets request per broker, the brokers at once, each request
// within Config.Net.ReadTimeout (or until the client's connections are
// cut). It returns the ends it had; a failure is logged at DEBUG and
// leaves its partitions out. A partition whose broker answers that it no
// longer leads it (or that its leader is not available, or that it does
// not know the partition), or whose broker's request fails, has the
// client refresh its topic's metadata
// once the listing is done (one request, bounded as the client's
// metadata requests are: Metadata.Retry.Max retries), so that the next
// listing asks its new leader; a partition whose leader the client does
// not know has the client refresh the metadata at once (Client.Leader).
func (l *Lister) List(read []Partition) map[Partition]int64 {
	reqs := map[*sarama.Broker]*sarama.OffsetRequest{}
	asked := map[*sarama.Broker][]Partition{}
	for _, k := range read {
		br, err := l.Client.Leader(k.Topic, k.Part)
		if err != nil {
			l.Log.Debug(l.Prefix+"the leader of a partition read is unknown; its log end is not listed",
				slog.String("topic", k.Topic), slog.Int("partition", int(k.Part)), slog.Any("error", l.Clean(err)))
			continue
		}
		req := reqs[br]
		if req == nil {
			req = sarama.NewOffsetRequest(l.Version)
			reqs[br] = req
		}
		req.AddBlock(k.Topic, k.Part, sarama.OffsetNewest, 1)
		asked[br] = append(asked[br], k)
	}
	got := map[Partition]int64{}
	var stale []string // topics whose metadata is to be refreshed
	var mu sync.Mutex
	var wg sync.WaitGroup
	for br, req := range reqs {
		wg.Go(func() {
			resp, err := br.GetAvailableOffsets(req)
			if err != nil {
				_ = br.Close() // the client opens it again at the next request
				l.Log.Debug(l.Prefix+"listing the log ends of partitions read failed",
					slog.String("broker", br.Addr()), slog.Any("error", l.Clean(err)))
				// The broker may be gone, its partitions led elsewhere.
				mu.Lock()
				defer mu.Unlock()
				for _, k := range asked[br] {
					if !slices.Contains(stale, k.Topic) {
						stale = append(stale, k.Topic)
					}
				}
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, k := range asked[br] {
				blk := resp.GetBlock(k.Topic, k.Part)
				err := error(sarama.ErrIncompleteResponse)
				if blk != nil {
					err = blk.Err
				}
				if errors.Is(err, sarama.ErrNoError) && len(blk.Offsets) == 1 {
					got[k] = blk.Offsets[0]
					continue
				}
				if staleLeader(err) && !slices.Contains(stale, k.Topic) {
					stale = append(stale, k.Topic)
				}
				l.Log.Debug(l.Prefix+"listing the log end of a partition read failed",
					slog.String("topic", k.Topic), slog.Int("partition", int(k.Part)), slog.Any("error", err))
			}
		})
	}
	wg.Wait()
	if len(stale) > 0 {
		slices.Sort(stale)
		if err := l.Client.RefreshMetadata(stale...); err != nil {
			l.Log.Debug(l.Prefix+"refreshing the metadata of topics whose leaders moved failed",
				slog.Any("topics", stale), slog.Any("error", l.Clean(err)))
		}
	}
	return got
}
