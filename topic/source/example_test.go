package source_test

import (
	"context"
	"fmt"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/source"
)

// A pipeline reads a topic as one member of the consumer group "workers";
// closing the topic ends the source, and the pipeline drains and stops by
// itself.
func ExampleNew() {
	h, _ := topic.NewTopic[string]("jobs", topic.Options{}, nil)
	src, err := source.New(source.Options[string]{Topic: h, Mode: topic.Balanced("workers")})
	if err != nil {
		fmt.Println(err)
		return
	}
	p, _ := pipeline.New(pipeline.Options[string, string]{
		Name:     "workers",
		Producer: producer.Options[string]{Source: src},
		Processors: processor.Options[string, string]{Concurrency: 1, Handle: func(_ context.Context, m *message.Message[string]) (string, error) {
			md, _ := message.MetadataAs[*source.Metadata](m)
			fmt.Printf("%s from %s\n", m.Data, md.Topic)
			return m.Data, nil
		}},
	})
	ctx := context.Background()
	_ = p.Start(ctx)
	for _, job := range []string{"resize", "crop", "upload"} {
		_ = h.Publish(ctx, job)
	}
	h.Close()
	<-p.Done()
	fmt.Println("source stats:", src.Stats().Received, "received")
	// Output:
	// resize from jobs
	// crop from jobs
	// upload from jobs
	// source stats: 3 received
}
