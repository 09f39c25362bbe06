package kafkalimits_test

import (
	"errors"
	"testing"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/kafkalimits"
	"github.com/boulevard-go/boulevard/validate"
)

// Guarantee: Check reports each selected field past its bound, naming it
// under the prefix, and nothing for a field at its bound, a field not
// selected, or a nil config.
func TestCheckReportsTheSelectedFieldsPastTheirBounds(t *testing.T) {
	c := sarama.NewConfig()
	c.ChannelBufferSize = kafkalimits.ChannelBufferSize
	c.Net.MaxOpenRequests = kafkalimits.OpenRequests
	c.Producer.Retry.Max = kafkalimits.ProducerRetries
	if errs := kafkalimits.Check("config", c, kafkalimits.All); len(errs) != 0 {
		t.Fatalf("Check at the bounds = %v, want none", errs)
	}
	c.ChannelBufferSize++
	c.Net.MaxOpenRequests++
	c.Producer.Retry.Max++
	es := validate.Errors{}
	for _, err := range kafkalimits.Check("config", c, kafkalimits.All) {
		var fe *validate.FieldError
		if !errors.As(err, &fe) {
			t.Fatalf("Check error %v is not a *validate.FieldError", err)
		}
		es = append(es, fe)
	}
	for _, f := range []string{"config.ChannelBufferSize", "config.Net.MaxOpenRequests", "config.Producer.Retry.Max"} {
		if !es.Has(f, "lte") {
			t.Errorf("Check = %v, want an lte error on %s", es, f)
		}
	}
	if errs := kafkalimits.Check("kafka.config", c, kafkalimits.Connections); len(errs) != 1 {
		t.Errorf("Check of Connections only = %v, want the one error on Net.MaxOpenRequests", errs)
	}
	if errs := kafkalimits.Check("config", nil, kafkalimits.All); errs != nil {
		t.Errorf("Check(nil) = %v", errs)
	}
}

// Guarantee: ShareChannels lowers ChannelBufferSize to the capacity's
// share of each partition, at least 1 a partition (and the whole capacity
// for a topic whose partitions are not known), and keeps a smaller value
// the config already has.
func TestShareChannelsGivesEachPartitionItsShareOfTheCapacity(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		buffer, parts, capacity int
		want                    int
	}{
		{"shared among partitions", 256, 4, 100, 25},
		{"more partitions than capacity", 256, 1000, 100, 1},
		{"no partition known", 256, 0, 100, 100},
		{"a smaller buffer kept", 10, 2, 100, 10},
	} {
		c := sarama.NewConfig()
		c.ChannelBufferSize = tc.buffer
		kafkalimits.ShareChannels(c, tc.parts, tc.capacity)
		if c.ChannelBufferSize != tc.want {
			t.Errorf("%s: ShareChannels(buffer %d, %d partitions, capacity %d) left %d, want %d",
				tc.name, tc.buffer, tc.parts, tc.capacity, c.ChannelBufferSize, tc.want)
		}
	}
}
