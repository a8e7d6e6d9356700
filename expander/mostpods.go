package expander

import (
	"context"

	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// mostPods keeps the options that help the most pods. It does not prefer
// bigger nodes: several small nodes help as many pods as one big one.
type mostPods struct{}

var _ Filter = mostPods{}

// BestOptions implements Filter.
func (mostPods) BestOptions(ctx context.Context, options []Option, _ map[string]*cloudprovider.NodeInfo) []Option {
	logger := klog.FromContext(ctx).V(4)
	return keepLowest(options, func(o Option) (float64, bool) {
		logger.Info("Expander scored option", "expander", "most-pods", "nodeGroup", groupID(o), "pods", len(o.Pods))
		return -float64(len(o.Pods)), true
	})
}
