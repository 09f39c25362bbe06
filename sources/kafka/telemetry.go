package kafka

import (
	"context"

	"github.com/boulevard-go/boulevard/telemetry"
)

// hookAssigned calls Options.Telemetry's PartitionAssigned, if any, for a
// partition the member has just claimed.
func (m *member) hookAssigned(p *partition) {
	if h := m.opts.Telemetry; h != nil && h.PartitionAssigned != nil {
		h.PartitionAssigned(m.ctx, m.assignment(p))
	}
}

// hookRevoked calls Options.Telemetry's PartitionRevoked, if any, for a
// partition the member has let go. The member's context may be over
// (the source is closing), so the hook gets a context of its own.
func (m *member) hookRevoked(p *partition) {
	if h := m.opts.Telemetry; h != nil && h.PartitionRevoked != nil {
		h.PartitionRevoked(context.WithoutCancel(m.ctx), m.assignment(p))
	}
}

func (m *member) assignment(p *partition) telemetry.Assignment {
	return telemetry.Assignment{Group: m.opts.GroupID, Member: p.memberID, Generation: p.generation, Topic: p.topic, Partition: p.part}
}
