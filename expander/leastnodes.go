package expander

import (
	"context"

	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// leastNodes keeps the options that add the fewest nodes; options that add
// none are skipped.
type leastNodes struct{}

var _ Filter = leastNodes{}

// BestOptions implements Filter.
func (leastNodes) BestOptions(ctx context.Context, options []Option, _ map[string]*cloudprovider.NodeInfo) []Option {
	logger := klog.FromContext(ctx).V(4)
	return keepLowest(options, func(o Option) (float64, bool) {
		if o.NodeCount <= 0 {
			logger.Info("Expander skipped option adding no node", "expander", "least-nodes", "nodeGroup", groupID(o), "nodeCount", o.NodeCount)
			return 0, false
		}
		logger.Info("Expander scored option", "expander", "least-nodes", "nodeGroup", groupID(o), "nodeCount", o.NodeCount)
		return float64(o.NodeCount), true
	})
}
