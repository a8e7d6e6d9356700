package builder

import (
	"slices"

	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
)

// NewDeviceReadiness answers the disruption engine's question whether a
// Ready node has published its devices (disruption.Options.Devices) from
// the cluster state registry's last Update: a node among its group's
// ResourceUnreadyNodes (the DRA ResourceSlices of its group's template, or
// its GPU extended resource, not there yet) has not, and is no Ready
// replacement until it has.
func NewDeviceReadiness(state *clusterstate.Registry) disruption.DeviceReadiness {
	return deviceReadiness{state: state}
}

type deviceReadiness struct{ state *clusterstate.Registry }

// DevicesLate implements disruption.DeviceReadiness.
func (d deviceReadiness) DevicesLate(group, node string) bool {
	gs := d.state.Group(group)
	return gs != nil && slices.Contains(gs.ResourceUnreadyNodes, node)
}
