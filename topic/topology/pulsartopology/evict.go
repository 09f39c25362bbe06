package pulsartopology

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"
)

// ErrEvictionPolicy is wrapped by the error of a Declare whose hold topic
// or DLQ is under a policy that drops unacknowledged letters: a backlog
// quota that evicts, or, for a DLQ, a subscription expiration time (see
// EvictionError).
var ErrEvictionPolicy = errors.New("pulsartopology: a policy evicts letters before they are released or replayed")

// The policies an EvictionError names, as Pulsar's admin REST API does.
const (
	// PolicyBacklogQuota is a backlog quota (namespaces set-backlog-quota).
	PolicyBacklogQuota = "backlogQuota"
	// PolicySubscriptionExpiration is a subscription expiration time
	// (namespaces set-subscription-expiration-time).
	PolicySubscriptionExpiration = "subscriptionExpirationTime"
)

// quotaMessageAge is the type of a backlog quota on the age of a backlog's
// oldest message.
const quotaMessageAge = "message_age"

// ConsumerBacklogEviction is the backlog quota policy that drops the
// oldest unacknowledged messages of a subscription over its quota.
const ConsumerBacklogEviction = "consumer_backlog_eviction"

// BacklogQuota is a backlog quota in effect on a topic, as Pulsar's admin
// REST API reports it (pulsaradmin's utils.BacklogQuota, by type).
type BacklogQuota struct {
	// Type is "destination_storage" (a limit on a backlog's size) or
	// "message_age" (a limit on the age of its oldest message).
	Type string
	// LimitSize is the most bytes a subscription's backlog may hold; zero
	// or less for no size limit.
	LimitSize int64
	// LimitTime is the age of the oldest message a subscription's backlog
	// may hold; zero or less for no time limit.
	LimitTime time.Duration
	// Policy is what the broker does over the quota:
	// "producer_request_hold", "producer_exception" or
	// ConsumerBacklogEviction.
	Policy string
}

// EvictionAdmin is an Admin that also reads the policies that drop a
// topic's unacknowledged messages. When Options.Admin implements it,
// Declare checks them on the hold topics and the DLQ (see
// Options.Admin). With pulsar-client-go's pulsaradmin package, for
// example, from the topic's namespace:
//
//	m, err := admin.Namespaces().GetBacklogQuotaMapWithContext(ctx, ns) // tenant/namespace
//	// one BacklogQuota per entry: Type the key, LimitTime in seconds
//	minutes, err := admin.Namespaces().GetSubscriptionExpirationTimeWithContext(ctx, *nsName)
//
// Its calls must return once their context ends, as Admin's.
type EvictionAdmin interface {
	Admin
	// BacklogQuotas returns the backlog quotas in effect on topic (a full
	// name): the topic's own, else its namespace's, else the broker's
	// defaults; none when no quota applies.
	BacklogQuotas(ctx context.Context, topic string) ([]BacklogQuota, error)
	// SubscriptionExpiration returns how long a subscription of topic
	// without a consumer is kept before the broker deletes it, with its
	// backlog (the namespace's subscriptionExpirationTime, else the
	// broker's subscriptionExpirationTimeMinutes); zero (or less) when
	// subscriptions never expire.
	SubscriptionExpiration(ctx context.Context, topic string) (time.Duration, error)
}

// EvictionError is the error of a Declare whose hold topic or DLQ is under
// a policy that drops letters before they are released or replayed: a
// backlog quota with policy consumer_backlog_eviction (unless
// Options.AcceptBacklogEviction), which drops the oldest unacknowledged
// messages of a subscription over its quota, however young; such a quota
// of type message_age on a hold topic whose hold is at least 90% of its
// limitTime, Options.AcceptBacklogEviction or not (Hold set): a message's
// age counts from its publish, and once the topic's oldest unacknowledged
// message is older than limitTime (as a letter held that long is) the
// broker evicts every message published more than 90% of limitTime ago,
// so the letters held by then are dropped before they fall due; or, on a
// DLQ, a subscription expiration time, which deletes its subscription
// DeadSubscription (that has no consumer between replays) with the dead
// letters it holds. It wraps ErrEvictionPolicy. Declare changes no policy
// and makes no subscription: change or remove the policy (or, for Hold,
// raise limitTime above the hold divided by 0.9), and declare again.
type EvictionError struct {
	// Topic is the hold topic or DLQ (a full name).
	Topic string
	// DLQ is true when Topic is the DLQ.
	DLQ bool
	// Policy is PolicyBacklogQuota or PolicySubscriptionExpiration.
	Policy string
	// Quota is the evicting backlog quota (Policy PolicyBacklogQuota).
	Quota BacklogQuota
	// Hold is the delay of the hold topic Topic when Quota is a message_age
	// quota whose limitTime is at most the hold divided by 0.9, which
	// drops the letters held for it before they fall due; zero otherwise.
	Hold time.Duration
	// Expiration is the subscription expiration time (Policy
	// PolicySubscriptionExpiration).
	Expiration time.Duration
}

// Error names the topic, the policy and its values.
func (e *EvictionError) Error() string {
	kind, fate := "hold topic", "released"
	if e.DLQ {
		kind, fate = "DLQ", "replayed"
	}
	if e.Policy == PolicySubscriptionExpiration {
		return fmt.Sprintf("pulsartopology: subscription expiration time %s (%d minutes) of %s %q deletes its subscription %q, which has no consumer between replays, with the dead letters it holds; remove it (0)",
			e.Expiration, int64(e.Expiration/time.Minute), kind, e.Topic, DeadSubscription)
	}
	if e.Hold > 0 {
		return fmt.Sprintf("pulsartopology: backlog quota %s (limitTime %d) with policy %s on hold topic %q drops letters held for %s before they fall due, Options.AcceptBacklogEviction or not: the age counts from the hold's publish, and once the topic's oldest unacknowledged message is older than limitTime (as a letter held longer is) the broker evicts every message published more than 90%% of limitTime ago; raise limitTime above %d (the hold divided by 0.9), change the policy to producer_request_hold or producer_exception, or remove it",
			e.Quota.Type, int64(e.Quota.LimitTime/time.Second), e.Quota.Policy, e.Topic, e.Hold, int64(e.Hold*10/9/time.Second))
	}
	return fmt.Sprintf("pulsartopology: backlog quota %s (limitSize %d, limitTime %d) with policy %s on %s %q drops the oldest unacknowledged messages over the quota, however young: letters can be lost before they are %s; set its policy to producer_request_hold or producer_exception, remove it, or accept it with Options.AcceptBacklogEviction",
		e.Quota.Type, e.Quota.LimitSize, int64(e.Quota.LimitTime/time.Second), e.Quota.Policy, kind, e.Topic, fate)
}

// Unwrap returns ErrEvictionPolicy.
func (e *EvictionError) Unwrap() error { return ErrEvictionPolicy }

// The log messages of the eviction check.
const (
	msgEvictionUnread = "pulsartopology: the backlog quotas and subscription expiration of hold topics and DLQs could not be read; declaring them unchecked: an evicting quota or an expiring subscription drops letters"
	msgHoldExpiry     = "pulsartopology: subscriptions of the hold topic expire: held letters are deleted with the group's subscription when every reader of the group is down for longer"
)

// checkEviction reads, through Options.Admin when it is an EvictionAdmin,
// the backlog quotas and the subscription expiration in effect on q's
// hold topics and DLQ, and returns an *EvictionError for the first that
// drops letters (see EvictionError), the first hold that a message_age
// quota drops before it falls due (which Options.AcceptBacklogEviction
// does not accept) before any other. Unless it refuses, it logs one WARN
// naming the hold topics whose subscriptions expire; it logs one WARN in the backend's life when a policy
// cannot be read: a declaration does not fail only because it cannot be
// checked.
func (b *Backend[T]) checkEviction(ctx context.Context, q *queues[T]) error {
	admin, ok := b.opts.Admin.(EvictionAdmin)
	if !ok || (len(q.holds) == 0 && q.dlq == "") {
		return nil
	}
	actx, end := b.adminContext(ctx)
	defer end()
	var (
		refused *EvictionError
		errs    []error
		expire  []slog.Attr // the hold topics whose subscriptions expire
	)
	check := func(topic string, delay time.Duration, dlq bool) error {
		quotas, err := admin.BacklogQuotas(actx, topic)
		if err != nil {
			if err := b.adminEnded(ctx, "reading the backlog quotas of topic "+strconv.Quote(topic)); err != nil {
				return err
			}
			errs = append(errs, fmt.Errorf("topic %q: backlog quotas: %w", topic, err))
		}
		for _, bq := range quotas {
			if bq.Policy != ConsumerBacklogEviction {
				continue
			}
			switch {
			case bq.Type == quotaMessageAge && bq.LimitTime > 0 && delay > 0 && delay >= bq.LimitTime/10*9 &&
				(refused == nil || refused.Hold == 0):
				refused = &EvictionError{Topic: topic, Policy: PolicyBacklogQuota, Quota: bq, Hold: delay}
			case !b.opts.AcceptBacklogEviction && refused == nil:
				refused = &EvictionError{Topic: topic, DLQ: dlq, Policy: PolicyBacklogQuota, Quota: bq}
			}
		}
		exp, err := admin.SubscriptionExpiration(actx, topic)
		if err != nil {
			if err := b.adminEnded(ctx, "reading the subscription expiration of topic "+strconv.Quote(topic)); err != nil {
				return err
			}
			errs = append(errs, fmt.Errorf("topic %q: subscription expiration: %w", topic, err))
			return nil
		}
		switch {
		case exp <= 0:
		case dlq && refused == nil:
			refused = &EvictionError{Topic: topic, DLQ: true, Policy: PolicySubscriptionExpiration, Expiration: exp}
		case !dlq:
			expire = append(expire, slog.Duration(topic, exp))
		}
		return nil
	}
	for _, h := range q.holds {
		if err := check(h.full, h.delay, false); err != nil {
			return err
		}
	}
	if q.dlq != "" {
		if err := check(q.dlq, 0, true); err != nil {
			return err
		}
	}
	if len(errs) > 0 && b.evictionUnread.CompareAndSwap(false, true) {
		b.log.Warn(msgEvictionUnread, slog.Any("error", b.redact(errors.Join(errs...))))
	}
	if refused != nil {
		return refused
	}
	if len(expire) > 0 {
		b.log.Warn(msgHoldExpiry, slog.Any("expiration", slog.GroupValue(expire...)))
	}
	return nil
}
