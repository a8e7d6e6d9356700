package expander

import (
	"context"
	"fmt"
	"math"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// The price expander keeps the options whose added nodes cost least relative
// to what the pods they host are worth. Over the window [now, now+1h), for an
// option adding n nodes of template T to host pods p1..pk:
//
//	ratio   = ((n-r)·NodePrice(T) + a) / (Σ PodPrice(pi) + a)
//	size    = 1 + sizeWeight·|log2(cores(T) / preferred)|
//	gpu     = gpuPenalty when T has a GPU and no pi asks for it, else 1
//	missing = missingPenalty when the group does not exist yet, else 1
//	score   = ratio · size · gpu · missing
//
// r is how many of the n nodes come from reserved capacity already paid for
// (at most n): what the group says when it implements ReservedCapacity (the
// AWS provider's groups that launch into a Capacity Reservation or Capacity
// Block, for the instances left in it), else 0. Such nodes cost nothing
// more, so a reserved group wins over an ordinary one of the same size
// until its reservation is used up. a is the price of an anchor pod (1 cpu, 4Gi) over the window: it keeps
// options that host only a few cheap pods from swinging the ratio wildly and
// the ratio finite when the pods are free. preferred is a core count that
// grows with the cluster (see preferredCores), so the size factor mildly
// favours node sizes that suit the cluster: a node 2× off costs 10% more, 8×
// off 30% more. The GPU factor is strong enough that GPU nodes win only when
// nothing else remains. The lowest score wins, ties are kept. Options that
// cannot be priced (no template, a pricing error) are skipped; when none can
// be priced, every option is kept so that the next expander decides.
const (
	priceWindow    = time.Hour
	sizeWeight     = 0.1
	gpuPenalty     = 1000.0
	missingPenalty = 2.0
)

// anchorPod is the pod whose price stabilises the price ratio.
func anchorPod() *apiv1.Pod {
	return &apiv1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "price-expander-anchor"},
		Spec: apiv1.PodSpec{Containers: []apiv1.Container{{
			Name: "anchor",
			Resources: apiv1.ResourceRequirements{Requests: apiv1.ResourceList{
				apiv1.ResourceCPU:    resource.MustParse("1"),
				apiv1.ResourceMemory: resource.MustParse("4Gi"),
			}},
		}}},
	}
}

// preferredCores is the node size, in cores, that suits a cluster of n nodes:
// small clusters want small nodes, big clusters fewer, bigger ones.
func preferredCores(n int) float64 {
	switch {
	case n < 3:
		return 2
	case n < 10:
		return 4
	case n < 30:
		return 8
	case n < 100:
		return 16
	default:
		return 32
	}
}

// ReservedCapacity is implemented by node groups some of whose next nodes
// launch into capacity already paid for: ReservedNodesLeft is how many.
type ReservedCapacity interface {
	ReservedNodesLeft() int
}

// reservedNodes is how many of an option's nodes are already paid for.
func reservedNodes(o Option) int {
	r, ok := o.NodeGroup.(ReservedCapacity)
	if !ok {
		return 0
	}
	return min(max(r.ReservedNodesLeft(), 0), o.NodeCount)
}

type price struct {
	provider cloudprovider.CloudProvider
	pricing  cloudprovider.PricingModel
	nodes    NodeLister
	clock    clock.PassiveClock
}

var _ Filter = (*price)(nil)

// newPrice fails when the provider has no pricing model.
func newPrice(ctx context.Context, provider cloudprovider.CloudProvider, nodes NodeLister, clk clock.PassiveClock) (*price, error) {
	if provider == nil {
		return nil, fmt.Errorf("price expander needs a cloud provider")
	}
	pricing, err := provider.Pricing(ctx)
	if err != nil {
		return nil, fmt.Errorf("price expander: getting the pricing model of cloud provider %q: %w", provider.Name(), err)
	}
	return &price{provider: provider, pricing: pricing, nodes: nodes, clock: clk}, nil
}

// priceWindowEnv is what one BestOptions call prices against.
type priceWindowEnv struct {
	start, end time.Time
	anchor     float64
	preferred  float64
}

// BestOptions implements Filter.
func (p *price) BestOptions(ctx context.Context, options []Option, nodeInfos map[string]*cloudprovider.NodeInfo) []Option {
	if len(options) <= 1 {
		return options
	}
	logger := klog.FromContext(ctx).V(4)
	start := p.clock.Now()
	env := priceWindowEnv{start: start, end: start.Add(priceWindow), preferred: preferredCores(p.clusterSize(ctx))}
	anchor, err := p.pricing.PodPrice(ctx, anchorPod(), env.start, env.end)
	if err != nil {
		logger.Info("Price expander could not price its anchor pod; using none", "err", err)
	} else {
		env.anchor = anchor
	}
	best := keepLowest(options, func(o Option) (float64, bool) {
		s, err := p.score(ctx, o, nodeInfos[groupID(o)], env)
		if err != nil {
			logger.Info("Expander skipped option it could not price", "expander", "price", "nodeGroup", groupID(o), "err", err)
			return 0, false
		}
		return s, true
	})
	if len(best) == 0 {
		logger.Info("Price expander could price no option; keeping them all", "options", len(options))
		return options
	}
	return best
}

// score applies the formula above to one option.
func (p *price) score(ctx context.Context, o Option, info *cloudprovider.NodeInfo, env priceWindowEnv) (float64, error) {
	if info == nil || info.Node == nil {
		return 0, fmt.Errorf("no template node")
	}
	if o.NodeCount <= 0 {
		return 0, fmt.Errorf("option adds %d nodes", o.NodeCount)
	}
	nodePrice, err := p.pricing.NodePrice(ctx, info.Node, env.start, env.end)
	if err != nil {
		return 0, fmt.Errorf("pricing template node %s: %w", info.Node.Name, err)
	}
	var podsValue float64
	for _, pod := range o.Pods {
		v, err := p.pricing.PodPrice(ctx, pod, env.start, env.end)
		if err != nil {
			return 0, fmt.Errorf("pricing pod %s: %w", klog.KObj(pod), err)
		}
		podsValue += v
	}
	if podsValue+env.anchor <= 0 {
		return 0, fmt.Errorf("pods are worth nothing")
	}
	reserved := reservedNodes(o)
	ratio := (nodePrice*float64(o.NodeCount-reserved) + env.anchor) / (podsValue + env.anchor)

	size := 1.0
	if cores := float64(amount(info.Node.Status.Capacity, apiv1.ResourceCPU)) / 1000; cores > 0 {
		size += sizeWeight * math.Abs(math.Log2(cores/env.preferred))
	}
	gpu := 1.0
	if p.wastesGPU(ctx, info.Node, o.Pods) {
		gpu = gpuPenalty
	}
	missing := 1.0
	if o.NodeGroup != nil && !o.NodeGroup.Exist() {
		missing = missingPenalty
	}
	score := ratio * size * gpu * missing
	klog.FromContext(ctx).V(4).Info("Expander scored option", "expander", "price", "nodeGroup", groupID(o),
		"nodeCount", o.NodeCount, "reservedNodes", reserved, "nodePrice", nodePrice, "podsValue", podsValue, "anchor", env.anchor,
		"sizeFactor", size, "gpuFactor", gpu, "missingFactor", missing, "score", score)
	return score, nil
}

// wastesGPU reports whether node has a GPU that none of pods asks for.
func (p *price) wastesGPU(ctx context.Context, node *apiv1.Node, pods []*apiv1.Pod) bool {
	gpu := p.provider.GetNodeGpuConfig(ctx, node)
	if gpu == nil {
		return false
	}
	for _, pod := range pods {
		if gpu.ExtendedResourceName != "" && podUses(pod, gpu.ExtendedResourceName) {
			return false
		}
		if gpu.ExposedViaDra() && len(pod.Spec.ResourceClaims) > 0 {
			return false
		}
	}
	return true
}

// clusterSize counts the cluster's nodes, or, without a node lister, the
// target sizes of the provider's node groups. Errors count as an empty cluster.
func (p *price) clusterSize(ctx context.Context) int {
	logger := klog.FromContext(ctx)
	if p.nodes != nil {
		nodes, err := p.nodes.List(labels.Everything())
		if err != nil {
			logger.Error(err, "Price expander could not list nodes; assuming a small cluster")
		}
		return len(nodes)
	}
	groups, err := p.provider.NodeGroups(ctx)
	if err != nil {
		logger.Error(err, "Price expander could not list node groups; assuming a small cluster")
		return 0
	}
	n := 0
	for _, g := range groups {
		if size, err := g.TargetSize(ctx); err == nil {
			n += size
		}
	}
	return n
}
