package kafkaends

import (
	"io"
	"log/slog"
	"testing"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
)

// Guarantee: once a partition's leader moves to another broker, the
// listing that finds the old leader no longer leading it has the client
// refresh the topic's metadata, so the next listing asks the new leader
// and lists the partition's end again (rather than failing until the
// client's periodic metadata refresh).
func TestListingReachesAPartitionsNewLeaderAfterItMoves(t *testing.T) {
	const topicName = "moved"
	c, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.SeedTopics(1, topicName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Producer.Return.Successes = true
	cfg.Metadata.RefreshFrequency = 0 // no periodic refresh
	client, err := sarama.NewClient(c.ListenAddrs(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Close() }()
	prod, err := sarama.NewSyncProducerFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = prod.Close() }()
	const n = 3
	for range n {
		if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: topicName, Partition: 0, Value: sarama.StringEncoder("v")}); err != nil {
			t.Fatal(err)
		}
	}
	l := &Lister{Client: client, Version: cfg.Version, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Clean: func(err error) error { return err }}
	read := []Partition{{Topic: topicName, Part: 0}}
	if got := l.List(read); got[read[0]] != n {
		t.Fatalf("List before the leader moves = %v, want the end %d", got, n)
	}
	to := int32(0)
	if c.LeaderFor(topicName, 0) == 0 {
		to = 1
	}
	if err := c.MoveTopicPartition(topicName, 0, to); err != nil {
		t.Fatal(err)
	}
	// The first listing after the move may go to the old leader, which
	// answers NOT_LEADER_FOR_PARTITION; the one after must reach the new.
	var got map[Partition]int64
	for range 2 {
		if got = l.List(read); got[read[0]] == n {
			return
		}
	}
	t.Fatalf("List twice after the partition's leader moved = %v, want the end %d listed by its new leader", got, n)
}
