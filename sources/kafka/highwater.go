package kafka

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"

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
//
// A partition's leader is the client's cached one until a listing finds
// it stale (the partition's leader unknown, its answer saying the broker
// does not lead it, or its request to the leader failing): the listing
// then asks for the metadata of the
// partition's topic on its own connections, within its context, and the
// next listings ask the leader that metadata names. A member whose
// handlers are stuck fetches nothing, and nothing else would refresh the
// client's metadata before its periodic refresh (Metadata.RefreshFrequency).
type highWaters struct {
	m       *member
	cfg     *sarama.Config
	conns   *kafkaconn.Set            // nil until the first listing, and after a cut
	brokers map[string]*sarama.Broker // by address, open on conns
	leaders map[topicPart]string      // leaders' addresses learned by the listings, by claimed partition
}

// list is the member's claim.ListHighWaters.
func (h *highWaters) list(ctx context.Context, cs []*claim.Claim) {
	byLeader := make(map[string][]*claim.Claim)
	stale := make(map[string]bool) // topics whose metadata to ask for
	claimed := make(map[topicPart]bool, len(cs))
	for _, c := range cs {
		claimed[topicPart{c.Topic, c.Part}] = true
		addr, ok := h.leader(c)
		if !ok {
			stale[c.Topic] = true
			continue
		}
		byLeader[addr] = append(byLeader[addr], c)
	}
	maps.DeleteFunc(h.leaders, func(tp topicPart, _ string) bool { return !claimed[tp] })
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
		if err := h.listOn(addr, cs, stale); err != nil {
			h.m.log.Debug("kafka end offsets not listed", slog.String("broker", addr), slog.Any("error", flat(err)))
			for _, c := range cs {
				stale[c.Topic] = true // the broker may be gone, its partitions led elsewhere
			}
		}
	}
	if len(stale) > 0 && ctx.Err() == nil {
		if err := h.refresh(ctx, slices.Sorted(maps.Keys(stale))); err != nil {
			h.m.log.Debug("kafka partition leaders not looked up", slog.Any("error", flat(err)))
		}
	}
	if !stop() {
		h.close() // cut: the next listing connects again
	}
}

// leader returns the address of c's leader: the one the listings learned,
// else the client's.
func (h *highWaters) leader(c *claim.Claim) (string, bool) {
	if addr, ok := h.leaders[topicPart{c.Topic, c.Part}]; ok {
		return addr, true
	}
	b, err := h.m.client.Leader(c.Topic, c.Part)
	if err != nil {
		return "", false
	}
	return b.Addr(), true
}

// open returns the listings' connection to the broker at addr.
func (h *highWaters) open(addr string) (*sarama.Broker, error) {
	if b := h.brokers[addr]; b != nil {
		return b, nil
	}
	b := sarama.NewBroker(addr)
	if err := b.Open(h.cfg); err != nil {
		return nil, err
	}
	h.brokers[addr] = b
	return b, nil
}

// drop closes the listings' connection to the broker at addr.
func (h *highWaters) drop(addr string) {
	if b := h.brokers[addr]; b != nil {
		_ = b.Close()
		delete(h.brokers, addr)
	}
}

// listOn sends one ListOffsets request for the newest offsets of cs, whose
// leader is the broker at addr, and notes what it answers. It adds to stale
// the topic of each partition the broker says it does not lead.
func (h *highWaters) listOn(addr string, cs []*claim.Claim, stale map[string]bool) error {
	b, err := h.open(addr)
	if err != nil {
		return err
	}
	req := sarama.NewOffsetRequest(h.cfg.Version)
	for _, c := range cs {
		req.AddBlock(c.Topic, c.Part, sarama.OffsetNewest, 1)
	}
	resp, err := b.GetAvailableOffsets(req)
	if err != nil {
		h.drop(addr)
		return err
	}
	for _, c := range cs {
		block := resp.GetBlock(c.Topic, c.Part)
		switch {
		case block == nil:
		case errors.Is(block.Err, sarama.ErrNoError) && len(block.Offsets) == 1:
			c.NoteHighWater(block.Offsets[0])
		case leaderMoved(block.Err):
			stale[c.Topic] = true
		}
	}
	return nil
}

// leaderMoved reports whether err, a partition's error, says that the
// broker asked does not lead the partition (now).
func leaderMoved(err sarama.KError) bool {
	switch err {
	case sarama.ErrNotLeaderForPartition, sarama.ErrLeaderNotAvailable,
		sarama.ErrUnknownTopicOrPartition, sarama.ErrFencedLeaderEpoch:
		return true
	}
	return false
}

// refresh asks one broker, of those the listings are connected to, else of
// those the client knows, for the metadata of topics, and keeps the
// leaders it names for their partitions.
func (h *highWaters) refresh(ctx context.Context, topics []string) error {
	addrs := slices.Sorted(maps.Keys(h.brokers))
	for _, b := range h.m.client.Brokers() {
		if h.brokers[b.Addr()] == nil {
			addrs = append(addrs, b.Addr())
		}
	}
	err := errors.New("no broker known")
	for _, addr := range addrs {
		if ctx.Err() != nil {
			return lookupErr(ctx, err)
		}
		var b *sarama.Broker
		if b, err = h.open(addr); err != nil {
			continue
		}
		var resp *sarama.MetadataResponse
		if resp, err = b.GetMetadata(sarama.NewMetadataRequest(h.cfg.Version, topics)); err != nil {
			h.drop(addr)
			continue
		}
		h.learn(resp)
		return nil
	}
	return err
}

// learn keeps the leaders resp names for the partitions of its topics, and
// forgets those of the partitions it names none for.
func (h *highWaters) learn(resp *sarama.MetadataResponse) {
	addrs := make(map[int32]string, len(resp.Brokers))
	for _, b := range resp.Brokers {
		addrs[b.ID()] = b.Addr()
	}
	if h.leaders == nil {
		h.leaders = make(map[topicPart]string)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			tp := topicPart{t.Name, p.ID}
			if addr, ok := addrs[p.Leader]; ok && errors.Is(p.Err, sarama.ErrNoError) {
				h.leaders[tp] = addr
			} else {
				delete(h.leaders, tp)
			}
		}
	}
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
