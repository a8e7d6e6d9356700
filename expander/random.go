package expander

import (
	"context"

	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// random picks uniformly among the options. It is the --expander=random
// Strategy and the tie-breaker at the end of every chain; as a Filter it
// keeps just the option it picks.
type random struct {
	intn func(n int) int
}

var (
	_ Strategy = (*random)(nil)
	_ Filter   = (*random)(nil)
)

func newRandom(intn func(n int) int) *random { return &random{intn: intn} }

// BestOption implements Strategy.
func (r *random) BestOption(ctx context.Context, options []Option, _ map[string]*cloudprovider.NodeInfo) *Option {
	if len(options) == 0 {
		return nil
	}
	o := options[r.intn(len(options))]
	klog.FromContext(ctx).V(4).Info("Expander picked an option at random", "expander", "random",
		"nodeGroup", groupID(o), "candidates", len(options))
	return &o
}

// BestOptions implements Filter.
func (r *random) BestOptions(ctx context.Context, options []Option, nodeInfos map[string]*cloudprovider.NodeInfo) []Option {
	if o := r.BestOption(ctx, options, nodeInfos); o != nil {
		return []Option{*o}
	}
	return nil
}
