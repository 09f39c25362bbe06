package kafkatopology

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// cfgMaxMessageBytes is the topic configuration that bounds its record
// batches.
const cfgMaxMessageBytes = "max.message.bytes"

// limitTTL is how long the max.message.bytes read for a topic at a
// refusal, or the failure to read it, stands for the refusals after it.
const limitTTL = time.Minute

// topicLimits are the max.message.bytes of topics, read when the broker
// refused a record as too large: nothing is asked of the cluster on the
// way to a produce.
type topicLimits struct {
	mu sync.Mutex
	m  map[string]topicLimit
}

// topicLimit is a topic's max.message.bytes (0: it could not be read) and
// when it was read.
type topicLimit struct {
	limit int
	at    time.Time
}

// batchHeader is what a record batch (magic 2) takes besides its records,
// with the offset and length that precede it in the log: the broker counts
// it against max.message.bytes, and ByteSize does not.
const batchHeader = 61

// withTopicLimit returns err, and when it holds a *LetterTooLargeError the
// broker refused, sets its Limit to the topic's max.message.bytes (see
// topicLimit) if a record batch holding the record alone is over it.
func (b *Backend[T]) withTopicLimit(ctx context.Context, err error) error {
	var tl *LetterTooLargeError
	if errors.As(err, &tl) && tl.Broker && tl.Limit == 0 {
		if limit := b.topicLimit(ctx, tl.Topic); limit < tl.Size+batchHeader {
			tl.Limit = limit
		}
	}
	return err
}

// topicLimit returns kname's max.message.bytes (its own setting, else the
// brokers' message.max.bytes), 0 when the cluster does not tell. It is
// read through the backend's admin, within ctx and Options.AdminTimeout,
// and kept for limitTTL, a failure too (but for ctx ending), so that a partition whose release
// the broker refuses again and again asks once a minute at most.
func (b *Backend[T]) topicLimit(ctx context.Context, kname string) int {
	now := time.Now()
	b.limits.mu.Lock()
	l, ok := b.limits.m[kname]
	b.limits.mu.Unlock()
	if ok && now.Sub(l.at) < limitTTL {
		return l.limit
	}
	actx, cancel := context.WithTimeout(ctx, b.opts.AdminTimeout)
	defer cancel()
	limit, _ := bounded(actx, b, ErrAdmin, fmt.Sprintf("the %s of topic %q", cfgMaxMessageBytes, kname), func(*dialing) (int, error) {
		return readLimit(b.admin, kname)
	})
	if limit == 0 && ctx.Err() != nil {
		return 0 // the caller gave up: not the cluster's answer
	}
	b.limits.mu.Lock()
	if b.limits.m == nil {
		b.limits.m = map[string]topicLimit{}
	}
	b.limits.m[kname] = topicLimit{limit: limit, at: now}
	b.limits.mu.Unlock()
	return limit
}

// readLimit asks the cluster for kname's max.message.bytes.
func readLimit(admin sarama.ClusterAdmin, kname string) (int, error) {
	rs, err := admin.DescribeConfigs([]*sarama.ConfigResource{{Type: sarama.TopicResource, Name: kname, ConfigNames: []string{cfgMaxMessageBytes}}},
		sarama.DescribeConfigsOptions{})
	if err != nil {
		return 0, err
	}
	for _, r := range rs {
		if r == nil || r.Type != sarama.TopicResource || r.Name != kname {
			continue
		}
		if n, ok := describedLimit(r); ok {
			return n, nil
		}
	}
	return 0, fmt.Errorf("%s of topic %q not in the answer", cfgMaxMessageBytes, kname)
}
