package franz

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
)

// Guarantee: the clients a member builds outside the group, for its
// commits and for the lookup of where its claims start
// (OffsetTimestamp), carry ClientOptions (SASL, TLS) as the group's
// client does: on a cluster that requires SASL the member starts at the
// looked-up offsets and every handled offset is committed.
func TestMembersOwnClientsCarryTheClientOptionsCredentials(t *testing.T) {
	const topic, group, records = "events", "g-sasl-side", 10
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic), kfake.GroupMinSessionTimeout(100*time.Millisecond),
		kfake.EnableSASL(), kfake.Superuser("PLAIN", "svc", "pw-side"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	auth := kgo.SASL(plain.Auth{User: "svc", Pass: "pw-side"}.AsMechanism())
	pcl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), auth)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-time.Hour)
	for i := range records {
		if err := pcl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	pcl.Close()
	src, err := New(Options{
		Brokers:        c.ListenAddrs(),
		GroupID:        group,
		Topics:         []string{topic},
		InitialOffset:  OffsetTimestamp,
		StartTime:      start,
		CommitMode:     CommitOnAck,
		RevokeTimeout:  2 * time.Second,
		ConnectTimeout: 2 * time.Second,
		LookupTimeout:  time.Second,
		ClientOptions:  append(fastGroup(), auth),
	})
	if err != nil {
		t.Fatal(err)
	}
	runPipeline(t, "sasl-side", src, func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) { return m.Data, nil })
	wait.For(t, "every handled offset committed", func() bool { return committedOffset(c, group, topic) == records },
		func() string {
			return fmt.Sprintf("committed %d, stats %+v", committedOffset(c, group, topic), src.Stats())
		})
}
