// Package kafkaalone configures the sarama producers of the Kafka topic
// and topology backends that send each record in a request of its own.
// The broker refuses a whole record batch (MESSAGE_TOO_LARGE) when it is
// over the topic's max.message.bytes, failing every record in it: a
// record of a refused batch that fits alone is sent again through such a
// producer, where no other record shares its batch.
package kafkaalone

import "github.com/IBM/sarama"

// Config returns a copy of cfg for a producer that puts one record in
// each request and sends it at once. Its producer interceptors are cfg's,
// each skipping the records skip reports: sarama calls a producer's
// interceptors on every record it is handed, so a copy of a record that
// already went through them in another producer would go through them
// twice (a header appended twice, a value transformed twice, a span
// started twice). A producer made with it needs a client of its own, made
// with the config returned (a client's producers share its config).
func Config(cfg *sarama.Config, skip func(*sarama.ProducerMessage) bool) *sarama.Config {
	c := *cfg
	c.Producer.Flush.Frequency = 0
	c.Producer.Flush.Bytes = 0
	c.Producer.Flush.Messages = 0
	c.Producer.Flush.MaxMessages = 1
	if len(cfg.Producer.Interceptors) > 0 {
		c.Producer.Interceptors = make([]sarama.ProducerInterceptor, len(cfg.Producer.Interceptors))
		for i, in := range cfg.Producer.Interceptors {
			c.Producer.Interceptors[i] = unless{in, skip}
		}
	}
	return &c
}

// unless is a producer interceptor that calls its own on every record
// but those skip reports.
type unless struct {
	sarama.ProducerInterceptor
	skip func(*sarama.ProducerMessage) bool
}

// OnSend calls the interceptor on m unless skip reports it.
func (u unless) OnSend(m *sarama.ProducerMessage) {
	if u.skip != nil && u.skip(m) {
		return
	}
	u.ProducerInterceptor.OnSend(m)
}
