package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
)

// eventKind is what the source decided to generate for one order: a valid
// event or one of the malformed kinds the processors must reject.
type eventKind int

const (
	kindValid eventKind = iota
	kindBadJSON
	kindNegativeQuantity
	kindUnknownCurrency
	numKinds
)

// reason is the rejection reason the processors should find for an event of
// this kind (nil for a valid one).
func (k eventKind) reason() error {
	switch k {
	case kindBadJSON:
		return errBadJSON
	case kindNegativeQuantity:
		return errBadQuantity
	case kindUnknownCurrency:
		return errUnknownCurrency
	}
	return nil
}

// orderSource is a producer.Source that makes up order events as JSON bytes.
// It plays the part a Kafka or Pulsar consumer plays in a real pipeline, and
// follows the same rules:
//
//   - it registers one Feed per flow-controlled consumer (here: one, called
//     "orders") and fetches, that is generates, only as many messages as the
//     feed has been granted permits;
//   - every message carries the source's acknowledger and a per-message id
//     (the order's sequence number, playing the part of an offset);
//   - Run returns nil once n orders have been generated: the source is
//     exhausted, and the pipeline drains and stops by itself.
//
// Run may be called by several producer stages at once (Concurrency > 1), so
// the generator state is shared under a mutex, taken briefly for each check
// and each generated block.
type orderSource struct {
	producer.Basic
	n         int
	customers []string
	ack       acker.Acknowledger

	mu        sync.Mutex
	rng       *rand.Rand
	next      int           // sequence number of the next order
	generated [numKinds]int // orders generated, by kind
}

func newOrderSource(n int, customers []string, seed uint64, ack acker.Acknowledger) *orderSource {
	return &orderSource{
		n:         n,
		customers: customers,
		ack:       ack,
		rng:       rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
}

// Run is called once per producer stage. It returns nil when the source is
// exhausted and ctx.Err() when the pipeline stops it early.
func (s *orderSource) Run(ctx context.Context, stage *producer.Stage[[]byte]) error {
	// One feed: one flow-controlled consumer. Registered without a grant
	// callback, it keeps its permits itself: Flow.Initial now, Flow.Refill
	// more each time its remaining permits (granted minus dispatched) fall
	// to Flow.Threshold, which happens as messages leave the stage buffer
	// for the processors.
	feed := stage.NewFeed("orders", nil)
	stage.Logger().Debug("order source started", "orders", s.n, "customers", len(s.customers))

	var msgs []*message.Message[[]byte] // reused from delivery to delivery
	for !s.exhausted() {
		// Wait for permits and take what there is. This is the
		// back-pressure of the permit window reaching the "broker": when
		// the processors are busy, no refill comes and the loop waits here.
		n, err := feed.Acquire(ctx, 1000)
		if err != nil {
			return err // ctx cancelled: the pipeline is stopping
		}
		msgs = s.generate(msgs[:0], n)
		// Deliver never blocks: it appends to the stage buffer, which stays
		// within the permit window because we never deliver more than
		// granted.
		feed.Deliver(msgs...)
		clear(msgs) // do not keep delivered messages alive from here
	}
	// In the feed's stats, Remaining (granted minus dispatched) covers what
	// is buffered plus what may still be fetched; it never exceeds
	// Flow.MaxWindow().
	stage.Logger().Debug("order source exhausted", "feed", feed.Stats())
	return nil
}

func (s *orderSource) exhausted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next >= s.n
}

// generate makes up to k orders and appends them to dst. The messages are
// allocated in one block and set up with Message.Init, which is how a source
// avoids an allocation per message. Deliver copies the pointers out of its
// argument, so Run can reuse dst for the next delivery.
func (s *orderSource) generate(dst []*message.Message[[]byte], k int) []*message.Message[[]byte] {
	s.mu.Lock()
	defer s.mu.Unlock()
	k = min(k, s.n-s.next)
	block := make([]message.Message[[]byte], k)
	for i := range block {
		seq := s.next
		s.next++
		payload, kind := s.event(seq)
		s.generated[kind]++
		block[i].Init(payload, s.ack, uint64(seq))
		dst = append(dst, &block[i])
	}
	return dst
}

// orderEvent is the wire format of an order event. Quantity is a signed
// number on the wire, so a broken upstream can send a negative one.
type orderEvent struct {
	ID             string `json:"id"`
	Customer       string `json:"customer"`
	SKU            string `json:"sku"`
	Quantity       int    `json:"quantity"`
	UnitPriceCents int64  `json:"unit_price_cents"`
	Currency       string `json:"currency"`
}

var (
	skus       = []string{"book", "lamp", "chair", "desk", "mug", "pen", "rug", "sofa"}
	currencies = []string{"EUR", "EUR", "EUR", "USD", "USD", "GBP", "CHF"}
)

// event makes up order number seq. About one order in a hundred is of each
// malformed kind. Customers are skewed towards the first ones, so the
// per-customer table at the end is not flat. s.mu must be held.
func (s *orderSource) event(seq int) ([]byte, eventKind) {
	c := len(s.customers)
	e := orderEvent{
		ID:             fmt.Sprintf("ord-%07d", seq),
		Customer:       s.customers[min(s.rng.IntN(c), s.rng.IntN(c))],
		SKU:            skus[s.rng.IntN(len(skus))],
		Quantity:       1 + s.rng.IntN(5),
		UnitPriceCents: 199 + s.rng.Int64N(20000),
		Currency:       currencies[s.rng.IntN(len(currencies))],
	}
	kind := kindValid
	switch s.rng.IntN(100) {
	case 0:
		kind = kindBadJSON
	case 1:
		kind = kindNegativeQuantity
		e.Quantity = -e.Quantity
	case 2:
		kind = kindUnknownCurrency
		e.Currency = "XTS"
	}
	b, err := json.Marshal(e)
	if err != nil {
		panic(err) // orderEvent always marshals
	}
	if kind == kindBadJSON {
		b = b[:len(b)/2] // cut off mid-object, as a torn write would
	}
	return b, kind
}

// Generated reports how many orders the source has generated, in total and
// by kind.
func (s *orderSource) Generated() (total int, byKind [numKinds]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next, s.generated
}
