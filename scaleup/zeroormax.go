package scaleup

import (
	"fmt"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/estimator"
)

// zeroOrMaxShortfall says why a zeroOrMaxNodeScaling group cannot take all
// the nodes it needs to reach its max size (need) within the limits, or
// returns "". Such a group is never scaled up part of the way.
func zeroOrMaxShortfall(need int, l estimator.Limits, tmpl *cloudprovider.NodeInfo) string {
	if need > l.MaxNodes {
		return fmt.Sprintf("zeroOrMaxNodeScaling needs %d nodes at once, limits allow %d", need, max(0, l.MaxNodes))
	}
	cpu := tmpl.Node.Status.Capacity.Cpu().MilliValue() * int64(need)
	if l.MaxMilliCPU < 0 || (l.MaxMilliCPU > 0 && cpu > l.MaxMilliCPU) {
		return fmt.Sprintf("zeroOrMaxNodeScaling needs %d nodes at once, --cores-total does not allow them", need)
	}
	mem := tmpl.Node.Status.Capacity.Memory().Value() * int64(need)
	if l.MaxMemoryBytes < 0 || (l.MaxMemoryBytes > 0 && mem > l.MaxMemoryBytes) {
		return fmt.Sprintf("zeroOrMaxNodeScaling needs %d nodes at once, --memory-total does not allow them", need)
	}
	return ""
}
