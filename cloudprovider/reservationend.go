package cloudprovider

import "time"

// ReservationEnd is the end of the reserved capacity a node group's nodes
// run on: the capacity goes then, whatever runs on it.
type ReservationEnd struct {
	// ID names the reservation (an EC2 Capacity Block's ID).
	ID string
	// End is when the capacity is taken back.
	End time.Time
}

// ReservationEnder is an optional NodeGroup interface: a group whose
// nodes run on reserved capacity with a fixed end (an EC2 Capacity Block
// for ML) says when it ends. ok is false for a group with no such end (an
// ordinary group, an open-ended On-Demand Capacity Reservation). The
// disruption engine drains such a group's nodes before the end
// (disruption.ReservationEnding).
type ReservationEnder interface {
	ReservationEnd() (end ReservationEnd, ok bool)
}
