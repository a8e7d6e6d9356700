package aws

import (
	"time"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// A Capacity Block for ML ends at a fixed time; EC2 terminates its
// instances around then. The group of a block says when it ends
// (cloudprovider.ReservationEnder), and from its drain window on
// (WithCapacityBlockDrainBefore: that long before the end) it has no room
// left for a scale-up: the disruption engine is draining its nodes then
// (disruption.ReservationEnding), and a node launched into the block would
// only be drained in turn.

var _ cloudprovider.ReservationEnder = (*NodeGroup)(nil)

// WithCapacityBlockDrainBefore sets how long before a Capacity Block's end
// its group stops scaling up (0: only at the end).
func WithCapacityBlockDrainBefore(d time.Duration) Option {
	return func(p *Provider) { p.blockDrainBefore = max(d, 0) }
}

// ReservationEnd implements cloudprovider.ReservationEnder: the end of the
// Capacity Block the group launches into; ok is false for any other group
// (no reservation, an On-Demand Capacity Reservation, a block whose end was
// not read).
func (g *NodeGroup) ReservationEnd() (cloudprovider.ReservationEnd, bool) {
	r := g.reservation
	if r == nil || !isBlock(r.Type) || r.End.IsZero() {
		return cloudprovider.ReservationEnd{}, false
	}
	return cloudprovider.ReservationEnd{ID: r.ID, End: r.End}, true
}

func isBlock(typ string) bool { return typ == string(ec2types.CapacityReservationTypeCapacityBlock) }

// blockClosing reports whether a reservation of type typ ending at end is a
// Capacity Block inside its drain window at now.
func (p *Provider) blockClosing(typ string, end, now time.Time) bool {
	return isBlock(typ) && !end.IsZero() && !now.Before(end.Add(-p.blockDrainBefore))
}
