package claim

import (
	"errors"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/validate"
)

// shared holds the option fields both sources have, as each source's
// Options does.
type shared struct {
	InitialOffset, BeginOffset, CommitMode                           string
	CommitInterval, RedeliveryBackoff, RevokeTimeout, ConnectTimeout time.Duration
	HighWaterInterval                                                time.Duration
	FailurePolicy                                                    FailurePolicy
}

func (o *shared) fields() Fields {
	return Fields{InitialOffset: &o.InitialOffset, BeginOffset: &o.BeginOffset, CommitMode: &o.CommitMode,
		CommitInterval: &o.CommitInterval, FailurePolicy: &o.FailurePolicy, RedeliveryBackoff: &o.RedeliveryBackoff,
		RevokeTimeout: &o.RevokeTimeout, ConnectTimeout: &o.ConnectTimeout, HighWaterInterval: &o.HighWaterInterval}
}

// Guarantee: SetDefaults gives every zero shared field its documented
// default and keeps every field the user set.
func TestSetDefaultsFillsOnlyZeroFields(t *testing.T) {
	var zero shared
	zero.fields().SetDefaults()
	want := shared{InitialOffset: OffsetLatest, BeginOffset: BeginCommitted, CommitMode: CommitInterval,
		CommitInterval: time.Second, RedeliveryBackoff: time.Second, RevokeTimeout: 10 * time.Second,
		ConnectTimeout: 5 * time.Second, HighWaterInterval: 5 * time.Second, FailurePolicy: FailureCommit}
	if zero != want {
		t.Errorf("defaults = %+v, want %+v", zero, want)
	}
	set := shared{InitialOffset: OffsetEarliest, BeginOffset: BeginReset, CommitMode: CommitOnAck,
		CommitInterval: 2 * time.Second, RedeliveryBackoff: 3 * time.Second, RevokeTimeout: 4 * time.Second,
		ConnectTimeout: 6 * time.Second, HighWaterInterval: 7 * time.Second, FailurePolicy: FailureRedeliver}
	got := set
	got.fields().SetDefaults()
	if got != set {
		t.Errorf("SetDefaults changed set fields: %+v, want %+v", got, set)
	}
}

// Guarantee: the revoke timeout must be below the client's rebalance
// timeout: equal or above is an ltfield error on prefix.revokeTimeout that
// names the limit and its value.
func TestRevokeRule(t *testing.T) {
	if err := RevokeRule("kafka", 9*time.Second, 10*time.Second, "the rebalance timeout"); err != nil {
		t.Fatalf("revoke below the limit rejected: %v", err)
	}
	for _, revoke := range []time.Duration{10 * time.Second, 11 * time.Second} {
		err := RevokeRule("kafka", revoke, 10*time.Second, "the rebalance timeout")
		var fe *validate.FieldError
		if !errors.As(err, &fe) || fe.Field != "kafka.revokeTimeout" || fe.Rule != "ltfield" ||
			fe.Message != "kafka.revokeTimeout must be < the rebalance timeout (10s)" {
			t.Errorf("revoke %s: %#v, want an ltfield error on kafka.revokeTimeout", revoke, err)
		}
	}
}
