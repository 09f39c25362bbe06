package kafkatopic_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/sink"
	"github.com/boulevard-go/boulevard/topic/source"
)

// sliceSource delivers its values under the stage's permits, each with
// ack as its acknowledger and its index as its id, then waits for the
// pipeline to stop.
func sliceSource(values []string, ack acker.Acknowledger) producer.Source[string] {
	return producer.SourceFunc[string](func(ctx context.Context, stage *producer.Stage[string]) error {
		feed := stage.NewFeed("values", nil)
		for next := 0; next < len(values); {
			n, err := feed.Acquire(ctx, len(values)-next)
			if err != nil {
				return err
			}
			for _, v := range values[next : next+n] {
				feed.Deliver(message.New(v, ack, uint64(next)))
				next++
			}
		}
		<-ctx.Done()
		return nil
	})
}

// A pipeline publishes into a Kafka topic through topic/sink, and each
// upstream message is acknowledged only once the broker stored it; a
// downstream pipeline reads the topic through topic/source, and a second
// downstream pipeline taking over the group after the first stopped
// handles what the first had not: every message is handled at least once
// downstream, the records carry the keys and headers the backend derives
// from each value, and the headers the sink gives each message reach the
// downstream messages' metadata.
func TestPipelineThroughSinkAndSource(t *testing.T) {
	c := testbroker.Kafka(t)
	o := testOptions[string](c, topic.StringCodec{})
	o.Partitions = 3
	o.Key = func(v string) []byte { k, _, _ := strings.Cut(v, ":"); return []byte(k) }
	o.Headers = func(string) []sarama.RecordHeader {
		return []sarama.RecordHeader{{Key: []byte("origin"), Value: []byte("upstream")}}
	}
	b := newBackend(t, o)
	h := newTopic(t, b, "stage/out", topic.Options{})

	// The group exists before anything is published, so it reads it all.
	first := subscribe(t, h, topic.Balanced("down"))
	first.Close()

	logEnd := func() int64 {
		client, err := sarama.NewClient(c.ListenAddrs(), testbroker.SaramaConfig())
		if err != nil {
			t.Error(err)
			return -1
		}
		defer client.Close()
		var sum int64
		for p := range int32(3) {
			off, err := client.GetOffset("stage.out", p, sarama.OffsetNewest)
			if err != nil {
				t.Error(err)
				return -1
			}
			sum += off
		}
		return sum
	}

	quiet := slog.New(slog.DiscardHandler)
	const n = 300
	values := make([]string, n)
	for i := range values {
		values[i] = fmt.Sprintf("k%d:v%d", i%7, i)
	}
	var mu sync.Mutex
	acked := 0
	var ackErr error
	upstream := acker.Func(func(_ context.Context, ok, failed []acker.Outcome) {
		mu.Lock()
		acked += len(ok)
		want := acked
		mu.Unlock()
		if len(failed) > 0 {
			t.Errorf("upstream failures: %v", failed[0].Err)
		}
		// Every message acked upstream is already stored.
		if end := logEnd(); end < int64(want) {
			mu.Lock()
			ackErr = fmt.Errorf("%d messages acked upstream with %d records in the log", want, end)
			mu.Unlock()
		}
	})
	s, err := sink.New(sink.Options[string]{Binding: topic.Binding[string]{Handle: h},
		Headers: func(context.Context, message.Keyed) topic.Headers { return topic.Headers{"hop": "sink"} }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	up, err := pipeline.New(pipeline.Options[string, string]{
		Name:       "upstream",
		Logger:     quiet,
		Drainers:   []pipeline.Drainer{s},
		Producer:   producer.Options[string]{Source: sliceSource(values, &upstream)},
		Processors: processor.Options[string, string]{Concurrency: 4, Handle: s.Handler()},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := up.Start(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = up.Stop(context.Background()) }()

	handled := make(map[string]int)
	badHeaders := ""
	downstream := func(name string, stopAt int) {
		src, err := source.New(source.Options[string]{Topic: h, Mode: topic.Balanced("down")})
		if err != nil {
			t.Fatal(err)
		}
		p, err := pipeline.New(pipeline.Options[string, string]{
			Name:     name,
			Logger:   quiet,
			Producer: producer.Options[string]{Source: src},
			Processors: processor.Options[string, string]{Concurrency: 2, Handle: func(_ context.Context, m *message.Message[string]) (string, error) {
				md, _ := message.MetadataAs[*source.Metadata](m)
				mu.Lock()
				handled[m.Data]++
				if md == nil || md.Headers["hop"] != "sink" || md.Headers["origin"] != "upstream" {
					badHeaders = fmt.Sprintf("%s arrived with metadata %+v", m.Data, md)
				}
				mu.Unlock()
				return m.Data, nil
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		wait.Within(t, patience, name+" handling its share", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(handled) >= stopAt
		})
		if err := p.Stop(ctxT(t)); err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("%s Stop: %v", name, err)
		}
	}
	downstream("downstream-1", n/3)
	downstream("downstream-2", n)

	mu.Lock()
	defer mu.Unlock()
	if ackErr != nil {
		t.Fatal(ackErr)
	}
	if acked != n {
		t.Fatalf("%d messages acked upstream, want %d", acked, n)
	}
	if badHeaders != "" {
		t.Fatal(badHeaders)
	}
	for _, v := range values {
		if handled[v] == 0 {
			t.Fatalf("%s never handled downstream", v)
		}
	}

	// The records carry their keys and headers.
	cons, err := sarama.NewConsumer(c.ListenAddrs(), testbroker.SaramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition("stage.out", 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	rec := <-pc.Messages()
	k, _, _ := strings.Cut(string(rec.Value), ":")
	if string(rec.Key) != k || len(rec.Headers) != 2 || string(rec.Headers[0].Value) != "upstream" || string(rec.Headers[1].Value) != "sink" {
		t.Fatalf("record key %q headers %v for value %q", rec.Key, rec.Headers, rec.Value)
	}
}
