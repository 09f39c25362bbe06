package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
)

// billingBatcher is the name of the pipeline's only batcher. The processor
// routes every valid order to it with SetBatcher; without that call a
// message would go to message.DefaultBatcher ("default").
const billingBatcher = "billing"

// Order is one decoded, validated order: the Out type of the processors and
// the payload the billing batcher receives.
type Order struct {
	ID             string `json:"id"`
	Customer       string `json:"customer"`
	SKU            string `json:"sku"`
	Quantity       int    `json:"quantity"`
	UnitPriceCents int64  `json:"unit_price_cents"`
	Currency       string `json:"currency"`

	// AmountEURCents is not part of the event: the processor computes it
	// (quantity × unit price, converted to euro cents).
	AmountEURCents int64 `json:"-"`
}

// The reasons an order can be rejected. The processor wraps them with %w and
// the acknowledger sorts failures by them with errors.Is, which is how a
// real acknowledger would decide, for example, which dead-letter topic a
// message belongs in.
var (
	errBadJSON         = errors.New("bad JSON")
	errMissingField    = errors.New("missing or non-positive field")
	errBadQuantity     = errors.New("quantity must be positive")
	errUnknownCurrency = errors.New("unknown currency")
)

// failureReasons lists the rejection reasons in the order the report prints
// them.
var failureReasons = []error{errBadJSON, errMissingField, errBadQuantity, errUnknownCurrency}

// eurPerUnit holds made-up, fixed exchange rates: how many euro
// ten-thousandths one unit of each currency is worth. An order in any other
// currency is rejected.
var eurPerUnit = map[string]int64{
	"EUR": 10000,
	"USD": 9200,
	"GBP": 11700,
	"CHF": 10400,
}

// decodeOrder is the processor handler. It runs once per message, on one of
// the processors, and turns the raw event ([]byte, the pipeline's In type)
// into an Order (the Out type).
//
// Returning an error fails the message: it goes to no batcher, and the
// processor reports it to the message's acknowledger with this error. A
// valid order is routed to the billing batcher under its customer's batch
// key, so every batch holds the orders of a single customer.
func decodeOrder(_ context.Context, m *message.Message[[]byte]) (Order, error) {
	var o Order
	if err := json.Unmarshal(m.Data, &o); err != nil {
		return Order{}, fmt.Errorf("%w: %v", errBadJSON, err)
	}
	if err := o.validate(); err != nil {
		return Order{}, err
	}
	o.AmountEURCents = int64(o.Quantity) * o.UnitPriceCents * eurPerUnit[o.Currency] / 10000

	m.SetBatcher(billingBatcher)
	m.SetBatchKey(o.Customer)
	return o, nil
}

// validate checks the fields decodeOrder relies on. Each error names the
// order when it has an id, so a log line or a dead letter says which one was
// bad.
func (o *Order) validate() error {
	switch {
	case o.ID == "":
		return fmt.Errorf("%w: id", errMissingField)
	case o.Customer == "":
		return fmt.Errorf("order %s: %w: customer", o.ID, errMissingField)
	case o.Quantity <= 0:
		return fmt.Errorf("order %s: %w, got %d", o.ID, errBadQuantity, o.Quantity)
	case o.UnitPriceCents <= 0:
		return fmt.Errorf("order %s: %w: unit_price_cents", o.ID, errMissingField)
	}
	if _, ok := eurPerUnit[o.Currency]; !ok {
		return fmt.Errorf("order %s: %w %q", o.ID, errUnknownCurrency, o.Currency)
	}
	return nil
}

// discardPoison is the processors' failure hook (Broadway's handle_failed).
// It runs once per chunk with the messages that failed in it, before they are
// acknowledged. None of our failures can succeed on a second attempt (the
// bytes will not change), so it asks the source to treat them as done rather
// than deliver them again. Against Kafka this would commit past the offset;
// against Pulsar it would ack instead of nack.
func discardPoison(_ context.Context, failed []*message.Message[[]byte]) {
	for _, m := range failed {
		m.SetDisposition(acker.DispositionDiscard)
	}
}
