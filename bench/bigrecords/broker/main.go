// broker runs a kfake cluster or a pulsartest broker in its own process,
// seeds a topic with n records of size bytes and waits for SIGTERM.
package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

func main() {
	kind := flag.String("kind", "kafka", "kafka or pulsar")
	port := flag.Int("port", 19092, "listen port")
	parts := flag.Int("partitions", 1, "partitions")
	n := flag.Int("n", 100, "records")
	size := flag.Int("size", 1<<20, "record bytes")
	topic := flag.String("topic", "media", "topic")
	maxMsg := flag.Int("maxmsg", 0, "pulsartest MaxMessageSize (0 = its default)")
	flag.Parse()
	ctx := context.Background()
	payload := make([]byte, *size)
	rand.Read(payload) // incompressible, as media often is
	switch *kind {
	case "kafka":
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(*port),
			kfake.SeedTopics(int32(*parts), *topic),
			kfake.BrokerConfigs(map[string]string{"message.max.bytes": strconv.Itoa(64 << 20)}),
		)
		if err != nil {
			log.Fatal(err)
		}
		defer c.Close()
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...),
			kgo.ProducerBatchMaxBytes(64<<20), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
			kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
		if err != nil {
			log.Fatal(err)
		}
		for i := 0; i < *n; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: *topic, Value: payload}).FirstErr(); err != nil {
				log.Fatal(err)
			}
		}
		cl.Close()
	case "pulsar":
		b, err := pulsartest.Start(ctx, pulsartest.Options{Addr: fmt.Sprintf("127.0.0.1:%d", *port), MaxMessageSize: *maxMsg})
		if err != nil {
			log.Fatal(err)
		}
		defer b.Close()
		if *parts > 1 {
			if err := b.CreateTopic(*topic, *parts); err != nil {
				log.Fatal(err)
			}
		}
		for i := 0; i < *n; i++ {
			t := *topic
			if *parts > 1 {
				t = pulsartest.PartitionTopic(*topic, i%*parts)
			}
			if _, err := b.Publish(ctx, t, pulsartest.Message{Payload: payload}); err != nil {
				log.Fatal(err)
			}
		}
	}
	fmt.Println("READY")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}
