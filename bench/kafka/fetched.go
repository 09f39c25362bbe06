package main

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	gometrics "github.com/rcrowley/go-metrics"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetched is what a side's client fetched in one run: the fetch responses
// it read, the record batches it decoded and the bytes it received from
// the brokers (every response, not only fetches). The progress lines print
// it for both sides, so that a round in which one side fetched more often,
// or in smaller batches, can be told from one in which it spent more on
// each record: with the same client options both sides should fetch alike.
type fetched struct {
	fetches, batches, bytes atomic.Int64
}

func (f *fetched) String() string {
	return fmt.Sprintf("%d fetches, %d batches, %.2f MB", f.fetches.Load(), f.batches.Load(), float64(f.bytes.Load())/1e6)
}

// keptRegistry is a metric registry that keeps what is registered in it:
// sarama unregisters a broker's meters when it closes the broker, and a
// side's counts are read once its client has closed.
type keptRegistry struct{ gometrics.Registry }

func (keptRegistry) Unregister(string) {}
func (keptRegistry) UnregisterAll()    {}

// countFetches gives cfg a registry of its own that keeps sarama's counts
// for fromSarama.
func countFetches(cfg *sarama.Config) *sarama.Config {
	cfg.MetricRegistry = keptRegistry{gometrics.NewRegistry()}
	return cfg
}

// fromSarama reads the counts sarama kept in a side's metric registry
// (see countFetches).
func (f *fetched) fromSarama(cfg *sarama.Config) {
	r := cfg.MetricRegistry
	if m, ok := r.Get("consumer-fetch-rate").(gometrics.Meter); ok {
		f.fetches.Store(m.Count())
	}
	if h, ok := r.Get("consumer-batch-size").(gometrics.Histogram); ok {
		f.batches.Store(h.Count())
	}
	if m, ok := r.Get("incoming-byte-rate").(gometrics.Meter); ok {
		f.bytes.Store(m.Count())
	}
}

// franzHook counts what a franz-go client fetched into f.
type franzHook struct{ f *fetched }

var (
	_ kgo.HookBrokerRead     = franzHook{}
	_ kgo.HookFetchBatchRead = franzHook{}
)

func (h franzHook) OnBrokerRead(_ kgo.BrokerMetadata, key int16, bytesRead int, _, _ time.Duration, _ error) {
	h.f.bytes.Add(int64(bytesRead))
	if key == int16(kmsg.Fetch) {
		h.f.fetches.Add(1)
	}
}

func (h franzHook) OnFetchBatchRead(kgo.BrokerMetadata, string, int32, kgo.FetchBatchMetrics) {
	h.f.batches.Add(1)
}
