package kafkaends

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/kafkaconn"
	"github.com/boulevard-go/boulevard/internal/testbroker"
)

// n is how many records listerOf's topic holds.
const n = 3

// listerOf starts a cluster of two brokers with topicName, of one
// partition, produces n records to it, and returns the cluster and a
// Lister on a client of it that refreshes no metadata periodically.
func listerOf(t *testing.T, topicName string) (*kfake.Cluster, *Lister) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.SeedTopics(1, topicName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	l := newLister(t, c, sarama.ReadUncommitted)
	prod, err := sarama.NewSyncProducerFromClient(l.Client)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = prod.Close() }()
	for range n {
		if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: topicName, Partition: 0, Value: sarama.StringEncoder("v")}); err != nil {
			t.Fatal(err)
		}
	}
	return c, l
}

// newLister returns a Lister, closed at t's cleanup, on a client of c that
// reads at isolation level and refreshes no metadata periodically.
func newLister(t *testing.T, c *kfake.Cluster, level sarama.IsolationLevel) *Lister {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Producer.Return.Successes = true
	cfg.Metadata.RefreshFrequency = 0 // no periodic refresh
	cfg.Consumer.IsolationLevel = level
	client, err := sarama.NewClient(c.ListenAddrs(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	l := &Lister{Client: client, Conns: kafkaconn.New(cfg), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	t.Cleanup(l.Close)
	return l
}

// Guarantee: once a partition's leader moves to another broker, the
// listing that finds the old leader no longer leading it asks for the
// topic's metadata on its own connections, so the next listing asks the
// new leader and lists the partition's end again (rather than failing
// until the client's periodic metadata refresh).
func TestListingReachesAPartitionsNewLeaderAfterItMoves(t *testing.T) {
	// The first listing after the move may go to the old leader, which
	// answers NOT_LEADER_FOR_PARTITION; the one after must reach the new.
	listsAfterTheLeaderMoves(t, "moved", nil)
}

// listsAfterTheLeaderMoves lists the end of listerOf's topic, calls
// before, if set, with the cluster and the partition's leader, moves the
// partition to the other broker, and fails t unless one of the next two
// listings lists its end.
func listsAfterTheLeaderMoves(t *testing.T, topicName string, before func(c *kfake.Cluster, from int32)) {
	t.Helper()
	c, l := listerOf(t, topicName)
	read := []Partition{{Topic: topicName, Part: 0}}
	if got := l.List(t.Context(), read); got[read[0]] != n {
		t.Fatalf("List before the leader moves = %v, want the end %d", got, n)
	}
	from := c.LeaderFor(topicName, 0)
	if before != nil {
		before(c, from)
	}
	if err := c.MoveTopicPartition(topicName, 0, 1-from); err != nil {
		t.Fatal(err)
	}
	var got map[Partition]int64
	for range 2 {
		if got = l.List(t.Context(), read); got[read[0]] == n {
			return
		}
	}
	t.Fatalf("List twice after the partition's leader moved = %v, want the end %d listed by its new leader", got, n)
}

// Guarantee: once a partition's leader stops answering (its connections
// dropped, as a broker gone away) and its leadership moves to another
// broker, the listing whose request to it fails asks for the topic's
// metadata on its own connections, so a later listing asks the new
// leader and lists the partition's end again.
func TestListingReachesAPartitionsNewLeaderAfterItsLeaderStopsAnswering(t *testing.T) {
	// The first listing after the move goes to the old leader, whose
	// connection drops; the one after must reach the new.
	listsAfterTheLeaderMoves(t, "gone", func(c *kfake.Cluster, from int32) {
		c.ControlKey(int16(kmsg.ListOffsets), func(kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			if c.CurrentNode() != from {
				return nil, nil, false
			}
			return nil, errors.New("broker gone"), true // drops the connection
		})
	})
}

// Guarantee: a listing that finds a partition's leader moved while the
// cluster leaves metadata requests unanswered returns within its
// context's time: the leader is looked up on the listing's own
// connections, cut when its context ends, not through the client, whose
// requests take no context.
func TestListingWithAStaleLeaderReturnsWithinItsContextWhileMetadataHangs(t *testing.T) {
	c, l := listerOf(t, "hung")
	read := []Partition{{Topic: "hung", Part: 0}}
	if got := l.List(t.Context(), read); got[read[0]] != n {
		t.Fatalf("List before the leader moves = %v, want the end %d", got, n)
	}
	if err := c.MoveTopicPartition("hung", 0, 1-c.LeaderFor("hung", 0)); err != nil {
		t.Fatal(err)
	}
	testbroker.HangKafkaKey(t, c, kmsg.Metadata)
	ctx, cancel := context.WithTimeout(t.Context(), testbroker.HungDeadline)
	defer cancel()
	start := time.Now()
	listed := make(chan struct{})
	go func() {
		defer close(listed)
		l.List(ctx, read)
	}()
	select {
	case <-listed:
		if took := time.Since(start); took > testbroker.HungDeadline+testbroker.CloseMargin {
			t.Errorf("List with the leader moved and metadata unanswered took %v, want at most %v past its %v context", took.Round(time.Millisecond), testbroker.CloseMargin, testbroker.HungDeadline)
		}
	case <-time.After(testbroker.HungDeadline + testbroker.HungGrace):
		t.Errorf("List with the leader moved and metadata unanswered still runs %v past its %v context", testbroker.HungGrace, testbroker.HungDeadline)
	}
}

// Guarantee: the end listed for a reader of isolation level read
// committed is the partition's last stable offset, which leaves out the
// records of a transaction still open, that such a reader cannot read
// until it commits; for a reader of read uncommitted it is the
// high-water mark, which counts them.
func TestListingAsksForTheEndAReaderOfItsIsolationLevelReadsUpTo(t *testing.T) {
	const open = 2 // records of the transaction left open
	c, uncommitted := listerOf(t, "txn")
	committed := newLister(t, c, sarama.ReadCommitted)
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID("open"), kgo.DefaultProduceTopic("txn"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prod.Close)
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for range open {
		if err := prod.ProduceSync(t.Context(), &kgo.Record{Partition: 0, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	read := []Partition{{Topic: "txn", Part: 0}}
	if got := committed.List(t.Context(), read); got[read[0]] != n {
		t.Errorf("List read committed with a transaction of %d records open after %d = %v, want the end %d (the last stable offset)", open, n, got, n)
	}
	if got := uncommitted.List(t.Context(), read); got[read[0]] != n+open {
		t.Errorf("List read uncommitted with a transaction of %d records open after %d = %v, want the end %d (the high-water mark)", open, n, got, n+open)
	}
}

// deadDialer dials as net.Dialer does and keeps the connections it made,
// so that a test can end them as a broker or a network does with an idle
// connection.
type deadDialer struct {
	mu    sync.Mutex
	conns []net.Conn
}

func (d *deadDialer) Dial(network, addr string) (net.Conn, error) {
	c, err := net.Dial(network, addr)
	if err == nil {
		d.mu.Lock()
		d.conns = append(d.conns, c)
		d.mu.Unlock()
	}
	return c, err
}

// endAll ends every connection made so far.
func (d *deadDialer) endAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.conns {
		_ = c.Close()
	}
	d.conns = nil
}

// Guarantee: a listing whose connection kept from the listing before has
// ended meanwhile (a broker closes a connection idle longer than its
// connections.max.idle.ms, ten minutes by default, less than a
// HighWaterInterval may be) lists the ends on a new connection, rather
// than failing each listing whose interval outlasts the broker's idle
// limit.
func TestListingListsOnANewConnectionWhenTheKeptOneEnded(t *testing.T) {
	_, l := listerOf(t, "idle")
	var d deadDialer
	cfg := *l.Client.Config()
	cfg.Net.Proxy.Enable, cfg.Net.Proxy.Dialer = true, &d
	l.Conns = kafkaconn.New(&cfg)
	read := []Partition{{Topic: "idle", Part: 0}}
	if got := l.List(t.Context(), read); got[read[0]] != n {
		t.Fatalf("first List = %v, want the end %d", got, n)
	}
	d.endAll()
	if got := l.List(t.Context(), read); got[read[0]] != n {
		t.Errorf("List after its kept connections ended = %v, want the end %d", got, n)
	}
}

// Guarantee: a listing that looks up the leader of a partition newly
// read while the connections kept from the listing before have ended
// meanwhile (a broker closes those idle past its limit) looks it up on a
// new connection, and lists the partition's end.
func TestListingLooksUpALeaderOnANewConnectionWhenTheKeptOnesEnded(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "idle", "later"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	l := newLister(t, c, sarama.ReadUncommitted)
	var d deadDialer
	cfg := *l.Client.Config()
	cfg.Net.Proxy.Enable, cfg.Net.Proxy.Dialer = true, &d
	l.Conns = kafkaconn.New(&cfg)
	idle, later := Partition{Topic: "idle", Part: 0}, Partition{Topic: "later", Part: 0}
	if got := l.List(t.Context(), []Partition{idle}); len(got) != 1 {
		t.Fatalf("first List = %v, want the end of %v", got, idle)
	}
	d.endAll()
	if got := l.List(t.Context(), []Partition{idle, later}); len(got) != 2 {
		t.Errorf("List of a partition newly read after the kept connections ended = %v, want the ends of %v and %v", got, idle, later)
	}
}

// Guarantee: the DEBUG line of a partition read whose leader is not known
// gives the error the metadata answered for its topic (a topic that does
// not exist, or that the client may not describe), not one the cluster
// did not give.
func TestAPartitionWithNoLeaderIsLoggedWithItsTopicsError(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	l := newLister(t, c, sarama.ReadUncommitted)
	var buf bytes.Buffer
	l.Log = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	l.Lines.NoLeader = "no leader"
	l.List(t.Context(), []Partition{{Topic: "absent", Part: 0}})
	if want := sarama.ErrUnknownTopicOrPartition.Error(); !strings.Contains(buf.String(), want) {
		t.Errorf("listing a partition of a topic that does not exist logged:\n%s\nwant its error %q", buf.String(), want)
	}
}

// Guarantee: once the metadata answers an error for a topic read (one
// deleted, or that the client may no longer describe), the leaders
// learned for its partitions are forgotten: the next listing looks the
// topic up again, and logs its partitions as having no leader with the
// topic's error, instead of asking the broker that led them.
func TestATopicsErrorForgetsTheLeadersLearnedForItsPartitions(t *testing.T) {
	c, l := listerOf(t, "deleted")
	var buf bytes.Buffer
	l.Log = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	l.Lines.NoLeader = "no leader"
	read := []Partition{{Topic: "deleted", Part: 0}}
	if got := l.List(t.Context(), read); got[read[0]] != n {
		t.Fatalf("List before the topic is deleted = %v, want the end %d", got, n)
	}
	if err := c.DeleteTopic("deleted"); err != nil {
		t.Fatal(err)
	}
	// The leader answers that it knows no such partition: the listing
	// looks the topic up, and the metadata answers the topic's error.
	l.List(t.Context(), read)
	asked := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.ListOffsets}, Observe: true, Count: -1})
	defer asked.Remove()
	buf.Reset()
	l.List(t.Context(), read)
	if hits := asked.Hits(); hits != 0 {
		t.Errorf("a listing after the metadata answered the topic's error asked a broker for its partition's end %d times, want none", hits)
	}
	if want := sarama.ErrUnknownTopicOrPartition.Error(); !strings.Contains(buf.String(), "no leader") || !strings.Contains(buf.String(), want) {
		t.Errorf("a listing after the metadata answered the topic's error logged:\n%s\nwant the partition's leader unknown, with the topic's error %q", buf.String(), want)
	}
}

// Guarantee: a listing of no partitions (the readers all gone, a member
// that claims none) closes the connections the listings before kept,
// rather than holding one to each former leader for as long as nothing
// is read.
func TestAListingOfNoPartitionsClosesTheConnectionsKept(t *testing.T) {
	_, l := listerOf(t, "left")
	read := []Partition{{Topic: "left", Part: 0}}
	if got := l.List(t.Context(), read); got[read[0]] != n {
		t.Fatalf("List = %v, want the end %d", got, n)
	}
	if l.Conns.Len() == 0 {
		t.Fatal("a listing kept no connection for the next")
	}
	l.List(t.Context(), nil)
	if open := l.Conns.Len(); open != 0 {
		t.Errorf("a listing of no partitions left %d connections open, want none", open)
	}
}

// Guarantee: a log end forgotten (its topic created again) is not put
// back by the listing under way when it was forgotten, whose answer may
// be the old partition's; a listing begun after it lists it again, and
// ends forgotten of other partitions do not count against it.
func TestAForgottenEndIsKeptOnlyFromAListingBegunAfter(t *testing.T) {
	var ends Ends
	k := Partition{"t", 0}
	read := []Partition{k}
	ends.Keep(ends.Begin(), read, map[Partition]int64{k: 10})
	under := ends.Begin()
	ends.Forget("t", 0)
	if got := ends.End("t", 0); got != 0 {
		t.Fatalf("End once forgotten = %d, want 0", got)
	}
	ends.Keep(under, read, map[Partition]int64{k: 10})
	if got := ends.End("t", 0); got != 0 {
		t.Fatalf("End after the listing under way when it was forgotten = %d, want 0", got)
	}
	ends.Keep(ends.Begin(), read, map[Partition]int64{k: 2})
	if got := ends.End("t", 0); got != 2 {
		t.Fatalf("End after a listing begun since = %d, want 2", got)
	}
	ends.Keep(ends.Begin(), read, nil) // failed: the end listed before stays
	if got := ends.End("t", 0); got != 2 {
		t.Fatalf("End after a failed listing = %d, want 2", got)
	}
}
