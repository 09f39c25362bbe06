package pulsartest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/wait"
)

// Guarantee: a broker started on the address of one that was closed (a
// broker restarting with nothing kept) never gives a message an id that a
// message of the closed broker had: an acknowledgement the client still
// sends after it reconnected, for a message it received before, does not
// acknowledge the new broker's message, which is delivered.
func TestRestartedBrokerAckOfAnOldMessageAcksNothingNew(t *testing.T) {
	ctx := ctxT(t)
	b1, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b1.Close() })
	addr := b1.Addr().String()
	topic := uniqueTopic(t)
	client := newClient(t, b1)
	cons, err := client.Subscribe(pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "sub", Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		AckGroupingOptions:          &pulsar.AckGroupingOptions{MaxSize: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	if _, err := b1.Publish(ctx, topic, Message{Payload: []byte("old")}); err != nil {
		t.Fatal(err)
	}
	old := receive(t, ctx, cons)
	if err := b1.Close(); err != nil {
		t.Fatal(err)
	}
	b2 := startBrokerWith(t, Options{Addr: addr})
	if _, err := b2.Publish(ctx, topic, Message{Payload: []byte("new")}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the consumer to reconnect to the new broker", func() bool {
		cs := b2.Consumers(topic, "sub")
		return len(cs) == 1 && cs[0].Connected
	})
	if err := cons.AckID(old.ID()); err != nil {
		t.Fatal(err)
	}
	m := receive(t, ctx, cons)
	if string(m.Payload()) != "new" {
		t.Fatalf("received %q, want the new broker's message", m.Payload())
	}
	if n := b2.Backlog(topic, "sub"); n != 1 {
		t.Fatalf("backlog %d before the new message is acknowledged, want 1", n)
	}
	if m.ID().LedgerID() == old.ID().LedgerID() {
		t.Fatalf("the new broker's message has the old one's ledger %d", m.ID().LedgerID())
	}
}

// ledgerChildEnv makes the test binary a broker process that publishes
// one message and prints its ledger id (TestLedgerIDsNeverRepeatAcrossProcesses).
const ledgerChildEnv = "PULSARTEST_LEDGER_CHILD"

// Guarantee: a broker restarted in a new process (a test broker run as a
// process of its own, stopped and started again on the same address)
// never gives a message an id that a message of the broker before it had:
// each process numbers its ledgers from above what an earlier one reached,
// so an acknowledgement a client still sends for a message of the earlier
// broker acknowledges nothing of the new one.
func TestLedgerIDsNeverRepeatAcrossProcesses(t *testing.T) {
	if os.Getenv(ledgerChildEnv) == "1" {
		b, err := Start(context.Background(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		ids, err := b.Publish(ctxT(t), "persistent://public/default/ledger", Message{Payload: []byte("m")})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("ledger=%d\n", ids[0].LedgerID)
		return
	}
	ledgerOf := func() uint64 {
		t.Helper()
		cmd := exec.CommandContext(ctxT(t), os.Args[0], "-test.run=^TestLedgerIDsNeverRepeatAcrossProcesses$", "-test.count=1")
		cmd.Env = append(os.Environ(), ledgerChildEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("broker process: %v\n%s", err, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(line, "ledger="); ok {
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
		}
		t.Fatalf("the broker process printed no ledger id:\n%s", out)
		return 0
	}
	first := ledgerOf()
	second := ledgerOf()
	if second <= first {
		t.Fatalf("the second broker process gave its first message ledger %d, the first one %d: ids repeat across processes", second, first)
	}
}

// Guarantee: UpdatePartitions adds partitions and nothing else: each new
// partition has the topic's durable subscriptions, so a message published
// there before any consumer found it is kept for them; the partition count
// clients are told grows; fewer partitions, or a topic that is not
// partitioned, are refused with their errors.
func TestUpdatePartitionsAddsPartitionsWithTheSubscriptions(t *testing.T) {
	ctx := ctxT(t)
	b := startBroker(t)
	topic := uniqueTopic(t)
	if err := b.CreateTopic(topic, 2); err != nil {
		t.Fatal(err)
	}
	client := newClient(t, b)
	cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "sub", Type: pulsar.Failover})
	if err != nil {
		t.Fatal(err)
	}
	cons.Close()
	if err := b.UpdatePartitions(topic, 4); err != nil {
		t.Fatal(err)
	}
	if err := b.UpdatePartitions(topic, 4); err != nil {
		t.Fatalf("UpdatePartitions to the current count: %v", err)
	}
	msgs := make([]Message, 8)
	for i := range msgs {
		msgs[i] = Message{Payload: []byte{byte(i)}}
	}
	if _, err := b.Publish(ctx, topic, msgs...); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if n := b.Backlog(PartitionTopic(topic, i), "sub"); n != 2 {
			t.Errorf("partition %d: backlog %d, want the 2 messages published there", i, n)
		}
	}
	parts, err := client.TopicPartitions(topic)
	if err != nil || len(parts) != 4 {
		t.Fatalf("the client is told %d partitions (%v), want 4", len(parts), err)
	}
	cons, err = client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "sub", Type: pulsar.Failover})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for range msgs {
		cons.Ack(receive(t, ctx, cons))
	}
	if err := b.UpdatePartitions(topic, 3); !errors.Is(err, ErrPartitionsShrink) {
		t.Errorf("UpdatePartitions to fewer: %v, want ErrPartitionsShrink", err)
	}
	plain := uniqueTopic(t)
	if err := b.CreateTopic(plain, 0); err != nil {
		t.Fatal(err)
	}
	if err := b.UpdatePartitions(plain, 2); !errors.Is(err, ErrNotPartitioned) {
		t.Errorf("UpdatePartitions of a topic that is not partitioned: %v, want ErrNotPartitioned", err)
	}
}
