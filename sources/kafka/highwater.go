package kafka

import (
	"context"
	"errors"
	"log/slog"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/kafkaconn"
	"github.com/boulevard-go/boulevard/sources/kafka/internal/claim"
)

// highWaters lists the end offsets of a member's claimed partitions
// (claim.Member.HighWaterLoop): one ListOffsets request per leader, on
// connections of its own, kept from one listing to the next and cut when a
// listing's context ends (its timeout, the member's Close). sarama's own
// requests take no context, and an answer it waits for holds the broker's
// connection, which the member's fetches share.
type highWaters struct {
	m       *member
	cfg     *sarama.Config
	conns   *kafkaconn.Set            // nil until the first listing, and after a cut
	brokers map[string]*sarama.Broker // by address, open on conns
}

// list is the member's claim.ListHighWaters.
func (h *highWaters) list(ctx context.Context, cs []*claim.Claim) {
	byLeader := make(map[string][]*claim.Claim)
	for _, c := range cs {
		leader, err := h.m.client.Leader(c.Topic, c.Part)
		if err != nil {
			continue // the next listing tries again; the fetches report the partition's failures
		}
		byLeader[leader.Addr()] = append(byLeader[leader.Addr()], c)
	}
	if h.conns == nil {
		h.cfg, h.conns = h.m.conns.Child(h.m.client.Config())
		h.brokers = make(map[string]*sarama.Broker)
	}
	stop := h.conns.CutWhenDone(ctx)
	for addr, b := range h.brokers {
		if byLeader[addr] == nil {
			_ = b.Close() // leads none of the claimed partitions now
			delete(h.brokers, addr)
		}
	}
	for addr, cs := range byLeader {
		if err := h.listOn(addr, cs); err != nil {
			h.m.log.Debug("kafka end offsets not listed", slog.String("broker", addr), slog.Any("error", flat(err)))
		}
	}
	if !stop() {
		h.close() // cut: the next listing connects again
	}
}

// listOn sends one ListOffsets request for the newest offsets of cs, whose
// leader is the broker at addr, and notes what it answers.
func (h *highWaters) listOn(addr string, cs []*claim.Claim) error {
	b := h.brokers[addr]
	if b == nil {
		b = sarama.NewBroker(addr)
		if err := b.Open(h.cfg); err != nil {
			return err
		}
		h.brokers[addr] = b
	}
	req := sarama.NewOffsetRequest(h.cfg.Version)
	for _, c := range cs {
		req.AddBlock(c.Topic, c.Part, sarama.OffsetNewest, 1)
	}
	resp, err := b.GetAvailableOffsets(req)
	if err != nil {
		_ = b.Close()
		delete(h.brokers, addr)
		return err
	}
	for _, c := range cs {
		if block := resp.GetBlock(c.Topic, c.Part); block != nil && errors.Is(block.Err, sarama.ErrNoError) && len(block.Offsets) == 1 {
			c.NoteHighWater(block.Offsets[0])
		}
	}
	return nil
}

// close closes the connections of the listings.
func (h *highWaters) close() {
	for _, b := range h.brokers {
		_ = b.Close()
	}
	if h.conns != nil {
		h.conns.Cut()
	}
	h.conns, h.brokers = nil, nil
}
