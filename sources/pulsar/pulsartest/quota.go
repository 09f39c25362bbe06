package pulsartest

import "strings"

// The retention policies of a backlog quota.
const (
	policyHold     = "producer_request_hold"
	policyFail     = "producer_exception"
	policyEviction = "consumer_backlog_eviction"
)

// sizeQuota returns the destination_storage quota, with a size limit, of
// the namespace of persistent topic tn.
func (a *adminPolicies) sizeQuota(tn topicName) (BacklogQuota, bool) {
	if !a.sized.Load() {
		return BacklogQuota{}, false
	}
	rest, ok := strings.CutPrefix(tn.full, "persistent://")
	if !ok {
		return BacklogQuota{}, false // a non-persistent topic has no backlog
	}
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) < 3 {
		return BacklogQuota{}, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.ns[parts[0]+"/"+parts[1]]
	if p == nil {
		return BacklogQuota{}, false
	}
	q, ok := p.backlogQuotas[QuotaDestinationStorage]
	return q, ok && q.LimitSize > 0
}

// backlogBytes is the size of t's backlog as a real broker measures it
// for a destination_storage quota (ManagedLedger
// .getEstimatedBacklogSize): the bytes from the mark-delete position of
// its slowest durable subscription to its end, individually acknowledged
// entries after that position included; 0 without durable subscriptions.
func (t *topic) backlogBytes() int64 {
	var n int64
	for _, s := range t.subs {
		if s.durable {
			n = max(n, s.backlogBytes())
		}
	}
	return n
}

// backlogBytes is the size of the entries from s's mark-delete position
// on.
func (s *subscription) backlogBytes() int64 {
	if s.markDelete >= uint64(len(s.t.entries)) {
		return 0
	}
	return s.t.size - s.t.entries[s.markDelete].off
}

// refuseProducerLocked reports whether a producer may not be created on
// topic tn, over its namespace's destination_storage quota with a
// producer policy, and the code and message a real broker's
// ServerCnx.handleProducer then answers.
func (b *Broker) refuseProducerLocked(tn topicName) (ServerErrorCode, string, bool) {
	q, ok := b.admin.sizeQuota(tn)
	if !ok || (q.Policy != policyHold && q.Policy != policyFail) {
		return 0, "", false
	}
	t := b.topicLocked(tn, false)
	if t == nil || t.backlogBytes() <= q.LimitSize {
		return 0, "", false
	}
	code := ProducerBlockedQuotaExceededException
	if q.Policy == policyHold {
		code = ProducerBlockedQuotaExceededError
	}
	return code, "pulsartest: Cannot create producer on topic with backlog quota exceeded", true
}

// enforceSizeQuotaLocked applies the destination_storage quota of t's
// namespace after a publish, as a real broker's BacklogQuotaManager does
// when its periodic check finds the topic over the quota (here checked
// at once): with producer_request_hold or producer_exception it closes
// every producer of t (CLOSE_PRODUCER; a client then fails to create
// the producer again until the backlog is back under the quota); with
// consumer_backlog_eviction it skips the oldest entries of each durable
// subscription over 90% of the quota until it is under that, as
// dropBacklogForSizeLimit does.
func (b *Broker) enforceSizeQuotaLocked(t *topic) {
	q, ok := b.admin.sizeQuota(t.name)
	if !ok || t.backlogBytes() <= q.LimitSize {
		return
	}
	switch q.Policy {
	case policyHold, policyFail:
		if t.producers > 0 {
			b.closeProducersLocked(t)
		}
	case policyEviction:
		target := q.LimitSize / 10 * 9
		for _, s := range t.subs {
			if !s.durable || s.backlogBytes() <= target {
				continue
			}
			for s.markDelete < uint64(len(t.entries)) && s.backlogBytes() > target {
				s.ack(nil, s.markDelete, ackSet{})
			}
			s.dispatch()
		}
	}
}
