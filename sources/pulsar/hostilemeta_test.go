package pulsar_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// Guarantee: messages whose keys, ordering keys and properties are not
// UTF-8, empty, huge or many, and whose event times lie before 1970 or
// centuries ahead, are each handled once with their key, ordering key and
// properties as published, byte for byte.
func TestOddKeysPropertiesAndEventTimesArriveAsPublished(t *testing.T) {
	e := newEnv(t)
	many := map[string]string{}
	for i := range 1000 {
		many[fmt.Sprintf("p%d", i)] = strings.Repeat("v", i%7)
	}
	msgs := []pulsartest.Message{
		{Payload: []byte("bad-utf8"), Key: "\xff\xfe", OrderingKey: "\x00\xc0", Properties: map[string]string{"": "", "\xff": "\xfe\x00"}},
		{Payload: []byte("many-properties"), Key: "k", Properties: many},
		{Payload: []byte("huge-key"), Key: strings.Repeat("k", 64<<10), OrderingKey: strings.Repeat("o", 64<<10)},
		{Payload: []byte("before-1970"), EventTime: time.UnixMilli(-1)},
		{Payload: []byte("far-ahead"), EventTime: time.Date(2261, 12, 31, 23, 59, 59, 999e6, time.UTC)},
	}
	if _, err := e.broker.Publish(context.Background(), "odd-meta", msgs...); err != nil {
		t.Fatal(err)
	}
	r := newReceived()
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"odd-meta"}, Subscription: "odd", Consumer: earliest(), Logger: testLogger()})
	_, stop := run(t, src, 1, producer.Flow{}, recordAll(r))
	wait.Within(t, waitLimit, "every message handled", func() bool { return r.distinct() == len(msgs) })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	counts, metas := r.snapshot()
	byPayload := map[string]bpulsar.Metadata{}
	for _, md := range metas {
		byPayload[string(md.Raw.Payload())] = md
	}
	for _, m := range msgs {
		p := string(m.Payload)
		md, ok := byPayload[p]
		if !ok || counts[p] != 1 {
			t.Errorf("%s: handled %d times", p, counts[p])
			continue
		}
		if md.Key != m.Key || md.OrderingKey != m.OrderingKey {
			t.Errorf("%s: key %.20q ordering key %.20q, want %.20q %.20q", p, md.Key, md.OrderingKey, m.Key, m.OrderingKey)
		}
		if len(m.Properties) > 0 && !maps.Equal(md.Properties, m.Properties) || len(m.Properties) == 0 && len(md.Properties) != 0 {
			t.Errorf("%s: %d properties, want %d as published", p, len(md.Properties), len(m.Properties))
		}
		if !md.EventTime.Equal(m.EventTime) {
			t.Errorf("%s: event time %v, want %v", p, md.EventTime, m.EventTime)
		}
	}
}
