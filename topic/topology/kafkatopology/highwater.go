package kafkatopology

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// listedEnds are the log ends of the partitions the backend's readers and
// releasers read, as the brokers listed them last (see
// Options.HighWaterInterval): Stats takes a partition's high-water mark
// as the greater of that and its latest fetch's, since a consumer that
// does not fetch (its buffer full, its partition paused) learns of no
// record produced meanwhile.
type listedEnds struct {
	mu sync.Mutex
	m  map[topicPartition]int64
}

// end returns the log end listed last for partition part of topic, 0 if
// none.
func (l *listedEnds) end(topic string, part int32) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m[topicPartition{topic, part}]
}

// keep sets the listed ends to those of read, the partitions read now:
// a partition's newly listed end from got, or the end listed before for
// one whose listing failed.
func (l *listedEnds) keep(read []topicPartition, got map[topicPartition]int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := make(map[topicPartition]int64, len(read))
	for _, k := range read {
		if end, ok := got[k]; ok {
			m[k] = end
		} else if end, ok := l.m[k]; ok {
			m[k] = end
		}
	}
	l.m = m
}

// listEnds lists the log ends of the partitions the backend reads every
// Options.HighWaterInterval until stop is closed.
func (b *Backend[T]) listEnds(stop <-chan struct{}) {
	tick := time.NewTicker(b.opts.HighWaterInterval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		read := b.readPartitions()
		b.ends.keep(read, b.listedEnds(read))
	}
}

// readPartitions returns the partitions the backend's group readers
// claim, its broadcast readers read and its releasers claim.
func (b *Backend[T]) readPartitions() []topicPartition {
	b.mu.Lock()
	rs := make([]interface {
		appendRead([]topicPartition) []topicPartition
	}, 0, len(b.readers)+len(b.releasers))
	for c := range b.readers {
		if r, ok := c.(interface {
			appendRead([]topicPartition) []topicPartition
		}); ok {
			rs = append(rs, r)
		}
	}
	for _, r := range b.releasers {
		rs = append(rs, r)
	}
	b.mu.Unlock()
	var read []topicPartition
	for _, r := range rs {
		read = r.appendRead(read)
	}
	return read
}

// listedEnds asks the leaders of the partitions read for their log ends,
// in one ListOffsets request per broker, the brokers at once, each
// request within Config.Net.ReadTimeout (or until Close cuts the
// connections). It returns the ends it had; a failure is logged at DEBUG
// and leaves its partitions out.
func (b *Backend[T]) listedEnds(read []topicPartition) map[topicPartition]int64 {
	reqs := map[*sarama.Broker]*sarama.OffsetRequest{}
	asked := map[*sarama.Broker][]topicPartition{}
	for _, k := range read {
		br, err := b.client.Leader(k.topic, k.part)
		if err != nil {
			b.log.Debug("kafkatopology: the leader of a partition read is unknown; its log end is not listed",
				slog.String("topic", k.topic), slog.Int("partition", int(k.part)), slog.Any("error", b.red.Err(err)))
			continue
		}
		req := reqs[br]
		if req == nil {
			req = sarama.NewOffsetRequest(b.cfg.Version)
			reqs[br] = req
		}
		req.AddBlock(k.topic, k.part, sarama.OffsetNewest, 1)
		asked[br] = append(asked[br], k)
	}
	got := map[topicPartition]int64{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for br, req := range reqs {
		wg.Go(func() {
			resp, err := br.GetAvailableOffsets(req)
			if err != nil {
				_ = br.Close() // the client opens it again at the next request
				b.log.Debug("kafkatopology: listing the log ends of partitions read failed",
					slog.String("broker", br.Addr()), slog.Any("error", b.red.Err(err)))
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, k := range asked[br] {
				blk := resp.GetBlock(k.topic, k.part)
				err := error(sarama.ErrIncompleteResponse)
				if blk != nil {
					err = blk.Err
				}
				if errors.Is(err, sarama.ErrNoError) && len(blk.Offsets) == 1 {
					got[k] = blk.Offsets[0]
					continue
				}
				b.log.Debug("kafkatopology: listing the log end of a partition read failed",
					slog.String("topic", k.topic), slog.Int("partition", int(k.part)), slog.Any("error", err))
			}
		})
	}
	wg.Wait()
	return got
}
