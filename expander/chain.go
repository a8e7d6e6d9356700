package expander

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// ErrGRPCNotWired is returned by NewChain for --expander=grpc when Deps has
// no GRPC constructor.
var ErrGRPCNotWired = errors.New("grpc expander: no client constructor in the expander's dependencies")

// chain runs its filters in order, stopping as soon as one option is left,
// and lets a random choice break whatever tie remains after the last. Like
// upstream, the first filter runs even on a single option, so a filter that
// drops every option (least-waste without templates) prevents the scale-up.
type chain struct {
	names   []string
	filters []Filter
	final   Strategy
}

var _ Strategy = (*chain)(nil)

// NewChain builds the --expander chain from names, which config.Validate has
// already checked: each Filter narrows the options in order; as soon as one
// option is left it is returned; if several remain after the last, a random
// one is chosen. It fails for an expander whose dependencies are missing
// (price without pricing, priority without a ConfigMap lister) and for grpc.
func NewChain(ctx context.Context, names []string, deps Deps) (Strategy, error) {
	if len(names) == 0 {
		return nil, fmt.Errorf("building the expander chain: no expander named")
	}
	c := &chain{names: slices.Clone(names), final: newRandom(deps.random())}
	for i, name := range names {
		f, err := newFilter(ctx, name, deps, i == len(names)-1)
		if err != nil {
			return nil, fmt.Errorf("building the expander chain %v: %w", names, err)
		}
		if name == config.RandomExpander && i != len(names)-1 {
			return nil, fmt.Errorf("building the expander chain %v: nothing may follow %q", names, name)
		}
		c.filters = append(c.filters, f)
	}
	return c, nil
}

// newFilter builds the expander called name.
// last says whether it ends the chain: a grpc expander that ends it falls
// back to least-waste, one followed by others to them.
func newFilter(ctx context.Context, name string, deps Deps, last bool) (Filter, error) {
	switch name {
	case config.RandomExpander:
		return newRandom(deps.random()), nil
	case config.MostPodsExpander:
		return mostPods{}, nil
	case config.LeastWasteExpander:
		return leastWaste{}, nil
	case config.LeastNodesExpander:
		return leastNodes{}, nil
	case config.PriceExpander:
		return newPrice(ctx, deps.Provider, deps.Nodes, deps.clock())
	case config.PriorityExpander:
		return newPriority(deps.ConfigMaps, deps.Recorder, deps.Namespace)
	case config.GRPCExpander:
		if deps.GRPC == nil {
			return nil, ErrGRPCNotWired
		}
		var fallback Filter
		if last {
			fallback = leastWaste{}
		}
		return deps.GRPC(fallback)
	default:
		return nil, fmt.Errorf("expander %q is not supported", name)
	}
}

// BestOption implements Strategy.
func (c *chain) BestOption(ctx context.Context, options []Option, nodeInfos map[string]*cloudprovider.NodeInfo) *Option {
	logger := klog.FromContext(ctx)
	remaining := options
	for i, f := range c.filters {
		before := len(remaining)
		remaining = f.BestOptions(ctx, remaining, nodeInfos)
		logger.V(4).Info("Expander narrowed the options", "expander", c.names[i], "before", before, "left", len(remaining))
		if len(remaining) == 1 {
			break
		}
		if len(remaining) == 0 {
			logger.V(2).Info("Expanders filtered out all options", "expanders", c.names, "by", c.names[i], "options", len(options))
			return nil
		}
	}
	only := remaining[0]
	best := &only
	if len(remaining) > 1 {
		best = c.final.BestOption(ctx, remaining, nodeInfos)
	}
	logger.V(4).Info("Expanders chose an option", "expanders", c.names, "nodeGroup", groupID(*best), "nodeCount", best.NodeCount)
	return best
}
