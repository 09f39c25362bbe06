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
// messages of a subscription over its quota, however young; or, on a DLQ,
// a subscription expiration time, which deletes its subscription
// DeadSubscription (that has no consumer between replays) with the dead
// letters it holds. It wraps ErrEvictionPolicy. Declare changes no policy
// and makes no subscription: change or remove the policy, and declare
// again.
type EvictionError struct {
	// Topic is the hold topic or DLQ (a full name).
	Topic string
	// DLQ is true when Topic is the DLQ.
	DLQ bool
	// Policy is PolicyBacklogQuota or PolicySubscriptionExpiration.
	Policy string
	// Quota is the evicting backlog quota (Policy PolicyBacklogQuota).
	Quota BacklogQuota
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
// drops letters (see EvictionError). Unless it refuses, it logs one WARN
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
	check := func(topic string, dlq bool) error {
		quotas, err := admin.BacklogQuotas(actx, topic)
		if err != nil {
			if err := b.adminEnded(ctx, "reading the backlog quotas of topic "+strconv.Quote(topic)); err != nil {
				return err
			}
			errs = append(errs, fmt.Errorf("topic %q: backlog quotas: %w", topic, err))
		}
		for _, bq := range quotas {
			if bq.Policy == ConsumerBacklogEviction && !b.opts.AcceptBacklogEviction && refused == nil {
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
		if err := check(h.full, false); err != nil {
			return err
		}
	}
	if q.dlq != "" {
		if err := check(q.dlq, true); err != nil {
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
