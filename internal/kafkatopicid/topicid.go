// Package kafkatopicid tells a Kafka topic deleted and created again
// under the same name by its topic ID (Kafka 2.8's metadata v10 on, asked
// for when sarama's Config.Version is at least 2.8): the new topic's
// partitions begin their offsets anew, and a reader whose position lives
// in memory, or a group session whose consumers go on from theirs, would
// otherwise read on from that position in the new topic, past its records
// below it.
package kafkatopicid

import (
	"errors"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// Of asks a broker client knows, the least loaded first, for topic's ID:
// one that does not answer (restarting, its connection dropped) leaves
// the question to the next, so that one broker down fails no reader's
// start. It is zero when the answer has none (a protocol version older
// than 2.8, or a cluster older than Kafka 2.8); the error is the answer's
// for the topic, or the last broker's when none answers. The requests go
// out on client's connections: Config.Net.ReadTimeout bounds each, and
// cutting the client's connections ends them at once.
func Of(client sarama.Client, topic string) (sarama.Uuid, error) {
	brokers := client.Brokers()
	if br := client.LeastLoadedBroker(); br != nil {
		brokers = append([]*sarama.Broker{br}, brokers...)
	}
	var resp *sarama.MetadataResponse
	err := error(sarama.ErrBrokerNotAvailable)
	for i, br := range brokers {
		if i > 0 && br == brokers[0] {
			continue // asked first
		}
		_ = br.Open(client.Config()) // already open, or failed: the request says
		if resp, err = br.GetMetadata(sarama.NewMetadataRequest(client.Config().Version, []string{topic})); err == nil {
			break
		}
	}
	if err != nil {
		return sarama.Uuid{}, err
	}
	for _, tm := range resp.Topics {
		if tm.Name != topic {
			continue
		}
		if !errors.Is(tm.Err, sarama.ErrNoError) {
			return sarama.Uuid{}, tm.Err
		}
		return tm.Uuid, nil
	}
	return sarama.Uuid{}, sarama.ErrIncompleteResponse
}

// Watch keeps the ID of a topic a reader reads, and tells when it
// changes. Its methods are safe for concurrent use.
type Watch struct {
	// Client asks for the ID (Of).
	Client sarama.Client
	// Topic is the topic watched.
	Topic string

	mu sync.Mutex
	id sarama.Uuid
}

// Start asks for the topic's ID and keeps it (a failed request keeps the
// one kept before, if any). A zero ID (the cluster or the protocol version
// gives none) leaves the watch off: Changed reports false and asks
// nothing.
func (w *Watch) Start() error {
	id, err := Of(w.Client, w.Topic)
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.id = id
	w.mu.Unlock()
	return nil
}

// On reports whether the watch knows an ID to compare with.
func (w *Watch) On() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.id != (sarama.Uuid{})
}

// Changed asks for the topic's ID and, when it is another than the one
// kept (the topic was deleted and created again), keeps it and reports
// true. A failed request, a topic that does not exist (deleted, not
// created again yet) or a watch that is off changes nothing.
func (w *Watch) Changed() bool {
	if !w.On() {
		return false
	}
	id, err := Of(w.Client, w.Topic)
	if err != nil || id == (sarama.Uuid{}) {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if id == w.id {
		return false
	}
	w.id = id
	return true
}

// Run calls changed each time Changed reports true, every interval until
// stop is closed; while the watch is off, it asks nothing.
func (w *Watch) Run(interval time.Duration, stop <-chan struct{}, changed func()) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			if w.Changed() {
				changed()
			}
		}
	}
}
