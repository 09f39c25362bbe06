package kafka_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// Guarantee: a source, with either client, whose user an ACL change
// denies READ on its topic while it runs fails its run at the first
// refused fetch, with an error wrapping ErrDenied and the refusal, and
// its stage is not reported degraded first (the run's failure says it
// all, and the pipeline's restart policy decides); once READ is granted
// back a new run reads on from the record written meanwhile: nothing is
// skipped.
func TestASourceDeniedReadFailsItsRunAndReadsOnOnceGrantedBack(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		k := testbroker.KafkaWithACLs(t)
		admin, err := sarama.NewClusterAdmin(k.ListenAddrs(), k.Config())
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close()
		if err := admin.CreateTopic(testTopic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
			t.Fatal(err)
		}
		auth := kgo.SASL(plain.Auth{User: k.User, Pass: k.Password}.AsMechanism())
		cl = cl.withKgo(auth)
		newSrc := func() testSource {
			o := sourceOptions(k.Cluster, "g-denied")
			o.Config.Net.SASL = k.Config().Net.SASL
			return cl.new(t, o)
		}
		var lines logtest.Lines
		l := newLedger()
		opts := pipelineOpts("denied", newSrc(), 1, l, nil)
		opts.Logger = slog.New(slog.NewTextHandler(&lines, nil))
		done := startOnce(t, opts, opts.Producer.Source.(testSource))
		produce(t, k.Cluster, 1, 0, 1, auth)
		wait.For(t, "the record written before the denial", func() bool { return l.handled(rec{0, 0}) })

		k.Deny(t, testTopic, sarama.AclOperationRead)
		produce(t, k.Cluster, 1, 1, 1, auth)
		select {
		case err = <-done:
		case <-time.After(20 * time.Second):
			t.Fatal("Run did not return within 20s of READ denied")
		}
		if want := cl.brokerErr(kerr.TopicAuthorizationFailed); !errors.Is(err, kafka.ErrDenied) || !errors.Is(err, want) {
			t.Fatalf("Run = %v, want an error wrapping %v and %v", err, kafka.ErrDenied, want)
		}
		if strings.Contains(err.Error(), k.Password) {
			t.Fatalf("Run = %v shows the password", err)
		}
		if n := lines.Count(producer.DegradedLog); n != 0 {
			t.Fatalf("%d degraded lines before the run failed, want none:\n%s", n, strings.Join(lines.All(), "\n"))
		}

		k.Grant(t, testTopic, sarama.AclOperationRead)
		again := newLedger()
		runOnceInto(t, "granted", newSrc(), again)
		wait.For(t, "the record written while denied, once granted back", func() bool { return again.handled(rec{0, 1}) })
	})
}
