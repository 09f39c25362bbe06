package kafka_test

import (
	"testing"

	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/sources/kafka/franz"
)

// Guarantee: a source keeps the brokers and topics it was made with: the
// caller's slices, given to New, and those Options returns can be reused
// without changing what the source reads (or racing with its runs).
func TestASourceKeepsItsTopicsWhenTheCallerReusesItsSlices(t *testing.T) {
	for name, build := range map[string]func(brokers, topics []string) func() (brokers, topics []string){
		"sarama": func(brokers, topics []string) func() ([]string, []string) {
			s, err := kafka.New(kafka.Options{Brokers: brokers, GroupID: "g", Topics: topics})
			if err != nil {
				t.Fatal(err)
			}
			return func() ([]string, []string) { o := s.Options(); return o.Brokers, o.Topics }
		},
		"franz": func(brokers, topics []string) func() ([]string, []string) {
			s, err := franz.New(franz.Options{Brokers: brokers, GroupID: "g", Topics: topics})
			if err != nil {
				t.Fatal(err)
			}
			return func() ([]string, []string) { o := s.Options(); return o.Brokers, o.Topics }
		},
	} {
		brokers, topics := []string{"127.0.0.1:1"}, []string{"orders"}
		options := build(brokers, topics)
		brokers[0], topics[0] = "127.0.0.1:2", "payments"
		b, tp := options()
		b[0], tp[0] = "127.0.0.1:3", "refunds"
		if b, tp := options(); b[0] != "127.0.0.1:1" || tp[0] != "orders" {
			t.Errorf("%s: the source reads brokers %q and topics %q, want those it was made with", name, b, tp)
		}
	}
}
