// Package franz is a Boulevard source that reads Kafka topics through a
// franz-go (github.com/twmb/franz-go/pkg/kgo) consumer group.
//
// It is the sarama source of package kafka with another client underneath:
// the same options (ClientOptions in place of the sarama Config), the same
// *Metadata on every message, the same Stats, and the same semantics,
// because both share one implementation of everything that does not talk
// to the client. Every producer stage of the pipeline is one group member;
// every partition the member claims is one flow-controlled feed with the
// pipeline's permit window; every message is acknowledged to its
// partition claim, which commits the contiguous prefix of handled offsets
// on an interval (or as soon as it advances, with CommitOnAck), when the
// partition is revoked and when the source closes. A revoked partition's
// messages still in the stage buffer are withdrawn, and its in-flight
// messages are waited for (at most RevokeTimeout) before the final commit,
// with eager and cooperative rebalancing alike. Where the two differ (the
// default strategy, flow control, how a start offset lookup is made: see
// Options.LookupTimeout), the table of docs/kafka.md, "Two clients", says
// so.
// See docs/kafka.md for the semantics in full, and for when to choose
// which client.
package franz

import (
	"context"
	"slices"

	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/kafka/internal/claim"
	"github.com/boulevard-go/boulevard/sources/kafka/internal/lifecycle"
)

// ErrClosed is returned by Run once the source has been closed. It and
// the other errors below are the sarama source's (kafka.ErrClosed, …):
// errors.Is matches either package's sentinel.
var ErrClosed = claim.ErrClosed

// ErrConnect is wrapped by the error Run returns when the member cannot
// reach the cluster; the pipeline then restarts the source with backoff.
// The error names every bootstrap broker and why it could not be reached.
var ErrConnect = claim.ErrConnect

// ErrUnknownTopic is wrapped by the error Run returns when a subscribed
// topic does not exist in the cluster (when Run starts, or when it is
// deleted while the member consumes); the error names the topics. Run
// returns it at once instead of retrying, so the pipeline's restart policy
// decides how long to wait for the topic.
var ErrUnknownTopic = claim.ErrUnknownTopic

// ErrConsume is wrapped by the error Run returns when the group kept
// failing: maxConsumeFailures group errors in a row, with no record
// fetched in between.
var ErrConsume = claim.ErrConsume

// ErrGroupProtocol is wrapped by the errors of a join the group's
// coordinator refuses because the group's members offer no partition
// assignment strategy in common with this member's
// (kerr.InconsistentGroupProtocol, which the error also wraps): a member
// on franz-go's default, cooperative-sticky, joining a group of members
// on sarama's default, range, or the other way round. The error names
// the group and the member's balancers. The member logs the first
// refusal of a run at WARN (the others at DEBUG) and keeps joining (the
// other members may be leaving, as in a rolling deploy), so Run returns it within ErrConsume, after
// maxConsumeFailures refusals in a row. It is kafka.ErrGroupProtocol.
var ErrGroupProtocol = claim.ErrGroupProtocol

// ErrDenied is wrapped by the error Run returns, at once, when Kafka refuses
// the credentials or a permission the member needs (on the group, a topic
// or the cluster; kerr.GroupAuthorizationFailed and its kin, which the
// error also wraps), whether to join the group, to fetch a claimed
// partition (the error then names it), or to list where new claims start
// (OffsetTimestamp), the metadata each of them needs included. It is
// kafka.ErrDenied.
var ErrDenied = claim.ErrDenied

// ErrStartRefused is wrapped by the error Run returns, at once, when the
// cluster refuses to list where the member's new claims start
// (OffsetTimestamp) with an error Kafka says not to retry (a *kerr.Error
// whose Retriable is false, which the error also wraps), other than an
// authorization refusal, which is ErrDenied. It is kafka.ErrStartRefused.
var ErrStartRefused = claim.ErrStartRefused

// ErrFetchRefused is wrapped by the error Run returns, at once, when the
// cluster answers a claimed partition's fetch with an error Kafka says
// not to retry other than an authorization refusal (which is ErrDenied),
// UNKNOWN_SERVER_ERROR (which brokers also send for passing faults, and
// which is fetched again) and OFFSET_OUT_OF_RANGE (which franz-go resets
// itself to InitialOffset): UNSUPPORTED_COMPRESSION_TYPE, INVALID_RECORD,
// UNSUPPORTED_VERSION, ... The error names the partition and wraps the
// broker's *kerr.Error. It is kafka.ErrFetchRefused.
var ErrFetchRefused = claim.ErrFetchRefused

// ErrCorruptBatch is wrapped by the error Run returns, at once, when a
// claimed partition's fetch returns a record batch the client cannot
// decode (franz-go's fetch error for a batch whose CRC or length does
// not match, or whose compression does not decompress): fetching again
// returns the same bytes, and skipping them would lose their records, so
// the member stops there, as Kafka's Java consumer does, and the
// pipeline's restart policy decides. The error names the partition and
// the offset of the batch, and wraps franz-go's error. A broker's
// CORRUPT_MESSAGE answer is retried inside franz-go (kerr calls it
// retriable) and never reaches the source. It is kafka.ErrCorruptBatch.
var ErrCorruptBatch = claim.ErrCorruptBatch

// ErrNotCreated is returned by Run, Validate and Info of a Source that New
// did not make (a zero Source, or a nil *Source): it has no options to
// run with. Its Stats are empty and Close returns nil. It is
// kafka.ErrNotCreated.
var ErrNotCreated = claim.ErrNotCreated

// ErrNilContext is returned by Run and Close for a nil context, before
// they do anything: Run connects nothing, and Close leaves the source
// open. It is kafka.ErrNilContext.
var ErrNilContext = claim.ErrNilContext

// maxConsumeFailures is how many group errors in a row make Run fail.
const maxConsumeFailures = 10

// Metadata is what a handler learns about a record; it is the sarama
// source's kafka.Metadata (the same type), read with
// message.MetadataAs[*franz.Metadata](m) or
// message.MetadataAs[*kafka.Metadata](m).
type Metadata = claim.Metadata

// Header is one record header.
type Header = claim.Header

// Stats is a snapshot of a source's members and their claimed partitions;
// it is the sarama source's kafka.Stats (the same type).
type Stats = claim.Stats

// MemberStats is one consumer-group member of Stats; it is the sarama
// source's kafka.MemberStats.
type MemberStats = claim.MemberStats

// PartitionStats is one claimed partition of MemberStats; it is the sarama
// source's kafka.PartitionStats.
type PartitionStats = claim.PartitionStats

// CommitError is the last commit of a member the broker did not accept; it
// is the sarama source's kafka.CommitError.
type CommitError = claim.CommitError

// Source reads Kafka topics through a franz-go consumer group. It
// implements producer.Source[[]byte] (the payload is the record value).
// Create it with New.
type Source struct {
	opts Options
	live lifecycle.Members[*member]
	// records is shared by the members' clients (kgo.WithPools).
	records recordPool
	made    bool // by New
}

var _ producer.Source[[]byte] = (*Source)(nil)

// New validates opts and returns a source. Nothing connects until the
// pipeline runs it. An invalid option is reported as a validate.Errors value
// naming each field and rule, for example "franz.brokers is required".
func New(opts Options) (*Source, error) {
	o := opts.WithDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	// Copies: the caller may reuse its slices once New has returned.
	o.Brokers, o.Topics = slices.Clone(o.Brokers), slices.Clone(o.Topics)
	return &Source{opts: o, made: true}, nil
}

// Options returns the source's options with their defaults applied; its
// Brokers and Topics are copies.
func (s *Source) Options() Options {
	o := s.opts
	o.Brokers, o.Topics = slices.Clone(o.Brokers), slices.Clone(o.Topics)
	return o
}

// Validate checks the options again (New already did). It returns
// ErrNotCreated for a Source New did not make.
func (s *Source) Validate() error {
	if s == nil || !s.made {
		return ErrNotCreated
	}
	return s.opts.Validate()
}

// Info describes the source to the pipeline: Ordered unless
// Options.Unordered (a partition's messages are handled in offset order by
// one processor), Window DefaultWindow when the pipeline's
// producer.Options.Flow.Initial is 0, and the errors of Validate.
func (s *Source) Info() (producer.Info, error) {
	if s == nil || !s.made {
		return producer.Info{Window: DefaultWindow}, ErrNotCreated
	}
	return producer.Info{Ordered: !s.opts.Unordered, Window: DefaultWindow}, s.Validate()
}

// String describes the source by its options, client options left out.
func (s *Source) String() string {
	if s == nil {
		return "franz.Source(nil)"
	}
	return "franz.Source(" + s.opts.String() + ")"
}

// Run joins the consumer group as one member and feeds the stage with the
// records of the partitions it claims, until ctx is cancelled. The member
// then stops fetching but stays in the group, so that the messages it
// delivered can still be acknowledged and committed, until Close, or until
// a rebalance comes first: then it commits what was handled and leaves the
// group rather than keep or claim partitions (whatever the strategy, as
// franz-go reports every rebalance to the member).
//
// Run first checks that a bootstrap broker answers (Options.ConnectTimeout)
// and that every topic exists. It returns an error wrapping ErrConnect when
// the cluster cannot be reached, ErrUnknownTopic when a topic does not
// exist, ErrDenied when Kafka refuses the member's credentials or
// permissions (a claimed partition's fetch and the start offset listing
// of OffsetTimestamp included, and the metadata they need),
// ErrStartRefused when the cluster refuses that listing with another
// error Kafka says not to retry, ErrFetchRefused when it answers a
// claimed partition's fetch with another such error (but for
// UNKNOWN_SERVER_ERROR), or ErrConsume when the group keeps
// failing; the pipeline logs it and restarts the source with backoff, as
// its restart policy says. A listing that fails otherwise (no answer
// within Options.LookupTimeout, an error Kafka says to retry) is tried
// again within the member (see Options.LookupTimeout) until the member
// drains, and any other fetch error (UNKNOWN_SERVER_ERROR included) is
// left to franz-go to fetch again,
// logged at WARN once per run of failures of the partition. It returns ErrClosed after
// Close, ErrNotCreated, at once, when New did not make the source, and
// ErrNilContext, at once, for a nil ctx. No error message contains a
// newline.
func (s *Source) Run(ctx context.Context, stage *producer.Stage[[]byte]) error {
	if ctx == nil {
		return ErrNilContext
	}
	if s == nil || !s.made {
		return ErrNotCreated
	}
	return s.live.Run(ctx, func() (*member, error) { return s.startMember(ctx, stage) })
}

// Close commits what was handled, leaves the group and closes every
// member's client. It waits for the partitions' in-flight messages at most
// Options.RevokeTimeout, or until ctx is done, and not at all for those a
// drain the pipeline cut short left without an outcome
// (producer.Stage.Abandoned). When ctx has ended (before Close, or
// while it waits), each member still leaves the group, waiting at most
// 500ms more for the answer: a member that closed without leaving would
// keep its partitions from the group until its session timed out. The
// connection check's attempts still running (see Options.ConnectTimeout)
// are waited for, and ended when ctx ends. It returns nil (errors while
// leaving the group are logged) but when ctx ends while another Close
// called meanwhile still closes the members (every Close waits for that
// closing): an error wrapping ctx.Err(). On a Source New did not make it
// does nothing.
// A nil ctx returns ErrNilContext and leaves the source as it was, open:
// call Close again with a context.
func (s *Source) Close(ctx context.Context) error {
	if ctx == nil {
		return ErrNilContext
	}
	if s == nil || !s.made {
		return nil
	}
	return s.live.Close(ctx)
}

// Stats returns a snapshot of the source's members and their claimed
// partitions. It is safe for concurrent use and costs nothing when not
// called. A Source New did not make has no member.
func (s *Source) Stats() Stats {
	if s == nil {
		return claim.SourceStats("", []MemberStats{})
	}
	return s.live.Stats(s.opts.GroupID)
}
