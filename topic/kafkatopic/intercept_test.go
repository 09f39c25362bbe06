package kafkatopic_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
)

// stampPrefix begins the key of the header stamp appends.
const stampPrefix = "stamp-"

// stamp is a producer interceptor, as a tracing one would be: on every
// call it appends a header of its own, keyed stampPrefix and the call's
// number (so that two calls on one record leave two headers even in
// topic.Headers, which keeps one value per key), and it counts its calls
// per record value.
type stamp struct {
	mu    sync.Mutex
	n     int
	calls map[string]int
}

func newStamp() *stamp { return &stamp{calls: make(map[string]int)} }

func (s *stamp) OnSend(m *sarama.ProducerMessage) {
	v, _ := m.Value.Encode()
	s.mu.Lock()
	s.n++
	n := s.n
	s.calls[string(v)]++
	s.mu.Unlock()
	m.Headers = append(m.Headers, sarama.RecordHeader{Key: fmt.Appendf(nil, "%s%d", stampPrefix, n), Value: []byte("span")})
}

// callsOn returns how many times s saw the record of value v.
func (s *stamp) callsOn(v string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[v]
}

// stamps returns the keys of the headers stamp set on it.
func stamps(it topic.Item[string]) []string {
	var keys []string
	for k := range it.Headers {
		if strings.HasPrefix(k, stampPrefix) {
			keys = append(keys, k)
		}
	}
	return keys
}

// Guarantee: a record of a batch the broker refused as too large, sent
// again alone, reaches the subscribers as it would have had it been sent
// once: each producer interceptor of Options.Config ran on it once, so a
// header an interceptor appends is on it once, and the interceptor saw
// each record once (the record over the limit too).
func TestResentRecordCarriesEachInterceptorsEffectOnce(t *testing.T) {
	const kname, k = "intercepted-resend", 5
	st := newStamp()
	rb := publishRefusedBatch(t, kname, k, func(o *kafkatopic.Options[string]) {
		o.Config.Producer.Interceptors = []sarama.ProducerInterceptor{st}
	})
	checkTooLarge(t, rb.bigErr, kname, 0)
	for range rb.small {
		it := recv(t, rb.s)
		if keys := stamps(it); len(keys) != 1 {
			t.Errorf("record %q arrived with the interceptor's headers %q, want one", it.Value, keys)
		}
		if err := rb.s.Ack(it.ID); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range append(rb.small, rb.big) {
		if n := st.callsOn(v); n != 1 {
			t.Errorf("the interceptor saw the record %.10q %d times, want once", v, n)
		}
	}
}

// Guarantee: a record sent alone from the start (larger than the limit
// read at the declaration, which the broker has raised since) goes
// through each producer interceptor of Options.Config once, as a record
// the producer batches does.
func TestRecordSentAloneCarriesEachInterceptorsEffectOnce(t *testing.T) {
	const kname = "intercepted-alone"
	c := testbroker.Kafka(t)
	limitedTopic(t, c, kname)
	o := testOptions[string](c, topic.StringCodec{})
	st := newStamp()
	o.Config.Producer.Interceptors = []sarama.ProducerInterceptor{st}
	b := newBackend(t, o)
	h := newTopic(t, b, kname, topic.Options{})
	s := subscribe(t, h, topic.Balanced("g"))
	raiseLimit(t, c, kname, 2*bigSize)

	_, big := oversizedValues(0)
	for _, v := range []string{"small", big} {
		if err := h.Publish(ctxT(t), v); err != nil {
			t.Fatalf("publish of %.10q: %v", v, err)
		}
		it := recv(t, s)
		if it.Value != v {
			t.Fatalf("received %.10q, want %.10q", it.Value, v)
		}
		if keys := stamps(it); len(keys) != 1 {
			t.Errorf("record %.10q arrived with the interceptor's headers %q, want one", v, keys)
		}
		if n := st.callsOn(v); n != 1 {
			t.Errorf("the interceptor saw the record %.10q %d times, want once", v, n)
		}
		if err := s.Ack(it.ID); err != nil {
			t.Fatal(err)
		}
	}
}

// raiseLimit sets kname's max.message.bytes on c to limit.
func raiseLimit(t *testing.T, c *kfake.Cluster, kname string, limit int) {
	t.Helper()
	admin, err := sarama.NewClusterAdmin(c.ListenAddrs(), testbroker.SaramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	v := fmt.Sprint(limit)
	if err := admin.AlterConfig(sarama.TopicResource, kname, map[string]*string{"max.message.bytes": &v}, false); err != nil {
		t.Fatal(err)
	}
}
