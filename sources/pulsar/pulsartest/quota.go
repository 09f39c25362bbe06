package pulsartest

import (
	"strings"
	"time"
)

// The retention policies of a backlog quota.
const (
	policyHold     = "producer_request_hold"
	policyFail     = "producer_exception"
	policyEviction = "consumer_backlog_eviction"
)

// sizeQuota returns the destination_storage quota, with a size limit, of
// the namespace of persistent topic tn.
func (a *adminPolicies) sizeQuota(tn topicName) (BacklogQuota, bool) {
	q, ok := a.quota(tn, QuotaDestinationStorage)
	return q, ok && q.LimitSize > 0
}

// ageQuota returns the message_age quota, with a time limit, of the
// namespace of persistent topic tn.
func (a *adminPolicies) ageQuota(tn topicName) (BacklogQuota, bool) {
	q, ok := a.quota(tn, QuotaMessageAge)
	return q, ok && q.LimitTime > 0
}

// quota returns the backlog quota of type kind of the namespace of
// persistent topic tn.
func (a *adminPolicies) quota(tn topicName, kind string) (BacklogQuota, bool) {
	if !a.enforced.Load() {
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
	q, ok := p.backlogQuotas[kind]
	return q, ok
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
// topic tn, over its namespace's destination_storage or message_age
// quota with a producer policy, and the code and message a real broker's
// ServerCnx.handleProducer then answers.
func (b *Broker) refuseProducerLocked(tn topicName) (ServerErrorCode, string, bool) {
	t := b.topicLocked(tn, false)
	if t == nil {
		return 0, "", false
	}
	q, ok := b.admin.sizeQuota(tn)
	if !ok || (q.Policy != policyHold && q.Policy != policyFail) || t.backlogBytes() <= q.LimitSize {
		q, ok = b.admin.ageQuota(tn)
		if !ok || (q.Policy != policyHold && q.Policy != policyFail) || !b.overAgeLocked(t, q) {
			return 0, "", false
		}
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
	target := q.LimitSize / 10 * 9
	b.overQuotaLocked(t, q.Policy, func(s *subscription) bool { return s.durable && s.backlogBytes() > target })
}

// oldestUnacked returns the publish time (unix ms) of the oldest
// message a durable subscription of t has not acknowledged, as a real
// broker finds it for a message_age quota with
// preciseTimeBasedBacklogQuotaCheck: the entry after the mark-delete
// position of its slowest durable subscription. It reports false when
// every durable subscription is caught up, or t has none.
func (t *topic) oldestUnacked() (int64, bool) {
	slowest, ok := uint64(0), false
	for _, s := range t.subs {
		if s.durable && s.markDelete < uint64(len(t.entries)) && (!ok || s.markDelete < slowest) {
			slowest, ok = s.markDelete, true
		}
	}
	if !ok {
		return 0, false
	}
	return t.entries[slowest].published, true
}

// overAgeLocked reports whether t's oldest unacknowledged message is
// older than the time limit of message_age quota q by the broker's clock.
func (b *Broker) overAgeLocked(t *topic, q BacklogQuota) bool {
	published, ok := t.oldestUnacked()
	return ok && b.nowLocked().UnixMilli()-published > q.LimitTime*1000
}

// enforceAgeQuotaLocked applies the message_age quota of t's namespace,
// as a real broker's BacklogQuotaManager does when its periodic check
// finds the oldest unacknowledged message of the topic's slowest durable
// subscription older than the quota's time limit: with
// producer_request_hold or producer_exception it closes every producer
// of t (a client then fails to create the producer again until that
// message is acknowledged); with consumer_backlog_eviction every
// subscription of t acknowledges its messages published more than 90% of
// the limit ago (delayed ones included), as the expiry a broker with
// preciseTimeBasedBacklogQuotaCheck runs.
func (b *Broker) enforceAgeQuotaLocked(t *topic) {
	q, ok := b.admin.ageQuota(t.name)
	if !ok || !b.overAgeLocked(t, q) {
		return
	}
	cutoff := b.nowLocked().UnixMilli() - q.LimitTime*1000/10*9
	b.overQuotaLocked(t, q.Policy, func(s *subscription) bool { return t.entries[s.markDelete].published < cutoff })
}

// overQuotaLocked does to t, over a backlog quota, what the quota's policy
// does: producer_request_hold and producer_exception close every producer
// of t; consumer_backlog_eviction acknowledges, on each subscription, the
// entry at its mark-delete position for as long as drop reports it is to
// go (and there is one).
func (b *Broker) overQuotaLocked(t *topic, policy string, drop func(*subscription) bool) {
	switch policy {
	case policyHold, policyFail:
		if t.producers > 0 {
			b.closeProducersLocked(t)
		}
	case policyEviction:
		for _, s := range t.subs {
			dropped := false
			for s.markDelete < uint64(len(t.entries)) && drop(s) {
				at := s.markDelete
				s.ack(nil, at, ackSet{})
				dropped = true
				if s.markDelete == at {
					break // not moved on: nothing more to drop
				}
			}
			if dropped {
				s.dispatch()
			}
		}
	}
}

// enforceQuotasLocked applies the backlog quotas of t's namespace.
func (b *Broker) enforceQuotasLocked(t *topic) {
	b.enforceSizeQuotaLocked(t)
	b.enforceAgeQuotaLocked(t)
}

// CheckBacklogQuotas runs now the check a real broker runs every
// backlogQuotaCheckIntervalInSeconds (60 s): it applies the backlog
// quotas of their namespaces to every persistent topic. The broker runs
// it for a topic after each publish to it, and checks a topic's quotas
// when a producer is created on it, but does not run it periodically: a
// message_age quota is enforced on messages that grew older than its
// limit since the topic's last publish only when this is called, at the
// time of the broker's clock (see SetClock). It does nothing on a closed Broker.
func (b *Broker) CheckBacklogQuotas() {
	if !b.admin.enforced.Load() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	for _, t := range b.topics {
		b.enforceQuotasLocked(t)
	}
}

// SetClock sets the clock by which the broker measures the age of a
// message for a message_age backlog quota: now minus its publish time
// (which the producer set). nil, the default, is time.Now. A test sets a
// clock ahead of time.Now to age a backlog without waiting, then calls
// CheckBacklogQuotas. Nothing else reads it: delayed delivery keeps real
// time.
func (b *Broker) SetClock(now func() time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.clock = now
}

// nowLocked is the time by the broker's clock.
func (b *Broker) nowLocked() time.Time {
	if b.clock == nil {
		return time.Now()
	}
	return b.clock()
}
