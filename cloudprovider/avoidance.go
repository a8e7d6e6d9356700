package cloudprovider

import "time"

// AvoidedGroup is a node group a provider asks the autoscaler not to scale
// up until Until, though no scale-up of it failed: the cloud told it that
// the group's capacity is going (every Spot offering of the group was
// interrupted lately). ErrorCode and ErrorMessage say why, as a failed
// scale-up's back-off reason would.
type AvoidedGroup struct {
	Group        string
	ErrorCode    string
	ErrorMessage string
	Until        time.Time
}

// CapacityAvoider is implemented by a provider that learns other than by a
// failed scale-up that a group cannot give capacity for a while. The
// cluster state registry asks it at every Update and holds each group it
// names backed off until its Until (a hold that leaves the exponential
// back-off of the group's real failures as it is), so the loop's scale-up
// and the disruption engine pick other groups. It must not do I/O: it
// answers from what the provider already knows.
type CapacityAvoider interface {
	// AvoidedGroups are the groups avoided at now (Until after now).
	AvoidedGroups(now time.Time) []AvoidedGroup
}
