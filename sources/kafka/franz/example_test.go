package franz_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/kafka/franz"
)

// A pipeline reading a topic of an in-process Kafka cluster (kfake) through
// franz-go: each handler sees the record value as the payload and the
// record's topic, partition, offset, key and headers as *franz.Metadata
// (the sarama source's *kafka.Metadata); handled offsets are committed for
// the group when the pipeline stops.
func Example() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(1, "greetings"),
		kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cluster.Close()

	// Seed the topic with three keyed records.
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, name := range []string{"ada", "grace", "edsger"} {
		r := &kgo.Record{Topic: "greetings", Key: []byte(name), Value: []byte("hello " + name),
			Headers: []kgo.RecordHeader{{Key: "n", Value: fmt.Appendf(nil, "%d", i)}}}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			fmt.Println(err)
			return
		}
	}
	cl.Close()

	src, err := franz.New(franz.Options{
		Brokers:        cluster.ListenAddrs(),
		GroupID:        "greeters",
		Topics:         []string{"greetings"},
		InitialOffset:  franz.OffsetEarliest,
		CommitInterval: 100 * time.Millisecond,
		RevokeTimeout:  5 * time.Second,
		ClientOptions: []kgo.Opt{
			kgo.HeartbeatInterval(100 * time.Millisecond),
			kgo.SessionTimeout(time.Second),
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	var mu sync.Mutex
	var lines []string
	done := make(chan struct{})
	p, err := pipeline.New(pipeline.Options[[]byte, []byte]{
		Name:     "greetings",
		Producer: producer.Options[[]byte]{Source: src},
		Processors: processor.Options[[]byte, []byte]{
			Handle: func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
				md, _ := message.MetadataAs[*franz.Metadata](m)
				n, _ := md.Header("n")
				mu.Lock()
				defer mu.Unlock()
				lines = append(lines, fmt.Sprintf("%s/%d@%d key=%s n=%s: %s", md.Topic, md.Partition, md.Offset, md.Key, n, m.Data))
				if len(lines) == 3 {
					close(done)
				}
				return m.Data, nil
			},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := p.Start(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	<-done
	if err := p.Stop(context.Background()); err != nil {
		fmt.Println(err)
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	fmt.Println("committed:", cluster.GroupInfo("greeters").Commits["greetings"][0].Offset)
	// Output:
	// greetings/0@0 key=ada n=0: hello ada
	// greetings/0@1 key=grace n=1: hello grace
	// greetings/0@2 key=edsger n=2: hello edsger
	// committed: 3
}
