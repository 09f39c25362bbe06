package kafka_test

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// refreshEvery is the metadata refresh interval of the tests of a topic
// that changes under a running source: sarama's
// Config.Metadata.RefreshFrequency, franz-go's kgo.MetadataMaxAge.
const refreshEvery = 300 * time.Millisecond

// refreshing returns cl whose sources refresh their metadata every
// refreshEvery, and opts with that sarama config.
func refreshing(cl client, opts kafka.Options) (client, kafka.Options) {
	opts.Config.Metadata.RefreshFrequency = refreshEvery
	return cl.withKgo(kgo.MetadataMaxAge(refreshEvery)), opts
}

// Guarantee: partitions added to a topic a running source reads are
// picked up within the metadata refresh interval: the records produced to
// them are handled and committed, and those of the old partition too.
func TestPartitionsAddedToARunningTopicAreConsumedAndCommitted(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		c := newCluster(t, 1)
		group := "g-added-partitions"
		cl, opts := refreshing(cl, sourceOptions(c, group))
		l := newLedger()
		watch := watchCommits(c, group, l)
		p := startPipeline(t, pipelineOpts("added", cl.new(t, opts), 1, l, nil))
		defer stopPipeline(t, p)
		ends := produce(t, c, 1, 0, 10)
		wait.Within(t, 20*time.Second, "the first partition committed", func() bool { return equalOffsets(committed(c, group), ends) })

		if err := testbroker.Admin(t, c.ListenAddrs()).CreatePartitions(testTopic, 3, nil, false); err != nil {
			t.Fatal(err)
		}
		for p, n := range produce(t, c, 3, 10, 30) {
			ends[p] += n
		}
		wait.Within(t, 20*time.Second, "every partition's records handled and committed", func() bool {
			return l.covers(ends) && equalOffsets(committed(c, group), ends)
		}, func() string { return fmt.Sprintf("committed %v, want %v, saw %d", committed(c, group), ends, l.total) })
		watch.check(t)
	})
}

// Guarantee: a topic deleted under a running source, with no other member
// to start a rebalance, makes Run fail with ErrUnknownTopic naming the
// topic within a few metadata refresh intervals, after a bounded number of
// log lines (one per event, not one per fetch); the pipeline then stops
// by its deadline.
func TestATopicDeletedUnderARunningSourceFailsRunNamingIt(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		c := newCluster(t, 2)
		group := "g-deleted-under"
		book := newLogBook()
		cl, opts := refreshing(cl, sourceOptions(c, group))
		opts.Logger = book.logger()
		src := cl.new(t, opts)
		l := newLedger()
		done := runOnceInto(t, "deleted-under", src, l)
		ends := produce(t, c, 2, 0, 10)
		wait.Within(t, 20*time.Second, "the records handled", func() bool { return l.covers(ends) })

		deleteTopic(t, c, testTopic)
		runFailsNamingTheTopic(t, done, book)
		if n := len(book.records()); n > 30 {
			t.Fatalf("%d log lines for one deleted topic, want a bounded few; last: %s", n, book.records()[n-1].Text)
		}
	})
}

// Guarantee: on a cluster that creates the topics a client asks for
// (Kafka's auto.create.topics.enable, true by default), a topic deleted
// under a running source stays deleted, whatever the sarama Config given
// allows (the source sets Config.Metadata.AllowAutoTopicCreation false;
// the franz-go client never asks), and Run fails with ErrUnknownTopic
// naming it, instead of the group reading a topic created again with
// the broker's defaults.
func TestATopicDeletedUnderASourceStaysDeletedOnAClusterThatCreatesTopics(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		c := newCluster(t, 2, kfake.AllowAutoTopicCreation())
		book := newLogBook()
		cl, opts := refreshing(cl, sourceOptions(c, "g-not-created-again"))
		opts.Config.Metadata.AllowAutoTopicCreation = true // sarama's default
		opts.Logger = book.logger()
		l := newLedger()
		done := runOnceInto(t, "not-created-again", cl.new(t, opts), l)
		ends := produce(t, c, 2, 0, 10)
		wait.Within(t, 20*time.Second, "the records handled", func() bool { return l.covers(ends) })
		deleteTopic(t, c, testTopic)
		runFailsNamingTheTopic(t, done, book)
		topics, err := testbroker.Admin(t, c.ListenAddrs()).ListTopics()
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := topics[testTopic]; ok {
			t.Fatalf("topic %q exists again after its deletion, with %d partition(s)", testTopic, d.NumPartitions)
		}
	})
}

// Guarantee: a topic deleted and re-created under a group is read again
// from InitialOffset ("earliest" here), so no record of the new topic is
// skipped: the cluster drops the group's offsets with the topic, and an
// offset that still reaches past the new log end (committed by a tool, or
// kept by the cluster) is out of range and resets to InitialOffset too.
func TestARecreatedTopicIsReadFromInitialOffsetNotFromTheOldCommits(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		c := newCluster(t, 2)
		group := "g-recreated"
		cl, opts := refreshing(cl, sourceOptions(c, group))
		l := newLedger()
		done := runOnceInto(t, "recreated-1", cl.new(t, opts), l)
		ends := produce(t, c, 2, 0, 20)
		wait.Within(t, 20*time.Second, "the old topic committed", func() bool { return equalOffsets(committed(c, group), ends) })
		deleteTopic(t, c, testTopic)
		runFailsNamingTheTopic(t, done, newLogBook())
		if got := committed(c, group); len(got) != 0 {
			t.Fatalf("the group's offsets of the deleted topic are %v, want none", got)
		}
		if err := testbroker.Admin(t, c.ListenAddrs()).CreateTopic(testTopic, &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1}, false); err != nil {
			t.Fatal(err)
		}
		fresh := produce(t, c, 2, 0, 6)
		commitOutside(t, c, group, ends) // past the new log end
		l2 := newLedger()
		p := startPipeline(t, pipelineOpts("recreated-2", cl.new(t, opts), 1, l2, nil))
		defer stopPipeline(t, p)
		wait.Within(t, 20*time.Second, "every record of the new topic handled and committed", func() bool {
			return l2.covers(fresh) && equalOffsets(committed(c, group), fresh)
		}, func() string {
			return fmt.Sprintf("committed %v, want %v, saw %d", committed(c, group), fresh, l2.total)
		})
	})
}

// runFailsNamingTheTopic fails the test unless done receives, within 20s
// of the test topic's deletion, ErrUnknownTopic naming the topic.
func runFailsNamingTheTopic(t *testing.T, done <-chan error, book logBook) {
	t.Helper()
	select {
	case err := <-done:
		if !errors.Is(err, kafka.ErrUnknownTopic) || !strings.Contains(err.Error(), `"`+testTopic+`"`) {
			t.Fatalf("Run = %v, want ErrUnknownTopic naming %q", err, testTopic)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("Run kept going after its topic was deleted; %d log lines", len(book.records()))
	}
}

// Guarantee: a topic of many partitions (BOULEVARD_SCALE_PARTITIONS, 256
// by default) deleted under a running source logs as many WARN lines as
// one of few partitions would, with either client: the partitions' fetches
// failing alike are one line for the first, not one per partition, its
// repeats, if any, name the topic and count the partitions, and as the
// member closes one INFO line ends the run, naming the topic and counting
// the partitions.
func TestATopicOfManyPartitionsDeletedUnderASourceLogsBoundedWarnings(t *testing.T) {
	parts := scalePartitions(256)
	eachClient(t, func(t *testing.T, cl client) {
		c := newCluster(t, parts)
		book := newLogBook()
		cl, opts := refreshing(cl, sourceOptions(c, "g-deleted-many"))
		opts.Logger = book.logger()
		src := cl.new(t, opts)
		l := newLedger()
		done := runOnceInto(t, "deleted-many", src, l)
		ends := produce(t, c, parts, 0, int(parts))
		wait.Within(t, 60*time.Second, "the records handled", func() bool { return l.covers(ends) })
		deleteTopic(t, c, testTopic)
		runFailsNamingTheTopic(t, done, book)
		warns := book.find(func(r logRecord) bool { return r.Level >= slog.LevelWarn })
		var texts []string
		for _, r := range warns {
			texts = append(texts, r.Text)
		}
		if len(warns) > 6 {
			t.Fatalf("%d WARN lines for one topic of %d partitions deleted, want a bounded few; the first:\n%s",
				len(warns), parts, strings.Join(texts[:min(10, len(texts))], "\n"))
		}
		for _, r := range warns {
			if r.Msg == "kafka consumer error (still)" &&
				(!strings.Contains(r.Text, " topic="+testTopic+" ") || !strings.Contains(r.Text, " partitions_count=")) {
				t.Errorf("the repeat of the partitions' failed fetches names no topic or count: %s", r.Text)
			}
		}
		ended := book.find(func(r logRecord) bool { return r.Msg == "kafka consumer error ended" })
		if len(ended) != 1 || ended[0].Level != slog.LevelInfo || !strings.Contains(ended[0].Text, " topic="+testTopic+" ") ||
			!strings.Contains(ended[0].Text, " partitions_count=") {
			var texts []string
			for _, r := range ended {
				texts = append(texts, r.Text)
			}
			t.Errorf("the partitions' failed fetches ended with %d lines, want one INFO line naming the topic and counting the partitions:\n%s",
				len(ended), strings.Join(texts, "\n"))
		}
	})
}
