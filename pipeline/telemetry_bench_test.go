package pipeline_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/benchsrc"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/telemetry"
)

// emptyHooks has every hook set to a function that does nothing.
var emptyHooks = benchsrc.EmptyHooks()

// coarseHooks are the chunk, batch and pipeline hooks of emptyHooks,
// without the per-message ones.
var coarseHooks = func() *telemetry.Hooks {
	h := *emptyHooks
	h.MessageStart, h.MessageStop, h.MessageException = nil, nil, nil
	return &h
}()

// untimedHooks are emptyHooks with NoDurations: every call, no clock.
var untimedHooks = func() *telemetry.Hooks {
	h := *emptyHooks
	h.NoDurations = true
	return &h
}()

// everyHooks are emptyHooks timing every chunk and message
// (DurationSampling 1): a clock reading per message.
var everyHooks = func() *telemetry.Hooks {
	h := *emptyHooks
	h.DurationSampling = 1
	return &h
}()

// benchHookSets are the hook configurations BenchmarkTelemetry compares.
var benchHookSets = []struct {
	name  string
	hooks *telemetry.Hooks
}{{"off", nil}, {"coarse", coarseHooks}, {"all", emptyHooks}, {"all-every", everyHooks}, {"all-untimed", untimedHooks}}

// benchOrder is the payload of the JSON handler, an order as the
// quickstart example decodes it.
type benchOrder struct {
	ID             string `json:"id"`
	Customer       string `json:"customer"`
	SKU            string `json:"sku"`
	Quantity       int    `json:"quantity"`
	UnitPriceCents int64  `json:"unit_price_cents"`
	Currency       string `json:"currency"`
}

var benchOrderJSON = []byte(`{"id":"o-1","customer":"c-42","sku":"SKU-7","quantity":3,"unit_price_cents":1250,"currency":"EUR"}`)

func benchJSONHandle(_ context.Context, m *message.Message[[]byte]) (int64, error) {
	var o benchOrder
	if err := json.Unmarshal(m.Data, &o); err != nil {
		return 0, err
	}
	return int64(o.Quantity) * o.UnitPriceCents, nil
}

// BenchmarkTelemetry: source → 2 processors → batcher of 100, with the
// hooks off, with the chunk, batch and pipeline hooks set to empty
// functions (coarse), with every hook set and the default duration
// sampling (all), with every hook set and every chunk timed (all-every),
// and with every hook set and NoDurations (all-untimed); with the trivial
// handler of the other benchmarks on messages initialised in place (empty)
// or allocated one by one with message.New (empty-new), and with one
// decoding a small JSON order (json).
func BenchmarkTelemetry(b *testing.B) {
	for _, hs := range benchHookSets {
		b.Run("empty/"+hs.name, func(b *testing.B) {
			benchRunWith(b, "init", benchIntData, benchIntHandle, []batcher.Options[int]{
				{Name: message.DefaultBatcher, BatchSize: 100, Handle: benchBatchHandle[int]},
			}, hs.hooks)
		})
	}
	// The same, with a source that allocates each message as a user's
	// source would (message.New), which the figures against the
	// hand-written pipeline use too.
	for _, hs := range benchHookSets {
		b.Run("empty-new/"+hs.name, func(b *testing.B) {
			benchRunWith(b, "new", benchIntData, benchIntHandle, []batcher.Options[int]{
				{Name: message.DefaultBatcher, BatchSize: 100, Handle: benchBatchHandle[int]},
			}, hs.hooks)
		})
	}
	data := func(int) []byte { return benchOrderJSON }
	for _, hs := range benchHookSets {
		b.Run("json/"+hs.name, func(b *testing.B) {
			benchRunWith(b, "init", data, benchJSONHandle, []batcher.Options[int64]{
				{Name: message.DefaultBatcher, BatchSize: 100, Handle: benchBatchHandle[int64]},
			}, hs.hooks)
		})
	}
}
