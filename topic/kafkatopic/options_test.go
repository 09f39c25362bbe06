package kafkatopic_test

import (
	"log/slog"
	"testing"

	"github.com/boulevard-go/boulevard/topic/kafkatopic"
)

// Guarantee: WithDefaults gives every zero field its documented default
// and keeps every field that is set.
func TestWithDefaultsFillsOnlyZeroFields(t *testing.T) {
	d := kafkatopic.Options[int]{}.WithDefaults()
	if d.Partitions != kafkatopic.DefaultPartitions || d.ReplicationFactor != kafkatopic.DefaultReplicationFactor ||
		d.Acks != kafkatopic.DefaultAcks || d.AdminTimeout != kafkatopic.DefaultAdminTimeout ||
		d.ConnectTimeout != kafkatopic.DefaultConnectTimeout || d.RevokeTimeout != kafkatopic.DefaultRevokeTimeout ||
		d.PublishBuffer != kafkatopic.DefaultPublishBuffer || d.Logger != slog.Default() {
		t.Fatalf("WithDefaults() = %+v, want every documented default", d)
	}
	own := slog.New(slog.DiscardHandler)
	s := kafkatopic.Options[int]{Partitions: 6, PublishBuffer: 9, Logger: own}.WithDefaults()
	if s.Partitions != 6 || s.PublishBuffer != 9 || s.Logger != own {
		t.Fatalf("WithDefaults() = %+v, replaced a field that was set", s)
	}
}
