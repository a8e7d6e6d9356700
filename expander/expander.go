package expander

import (
	"context"
	"math/rand/v2"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// Option is one way to scale up: add NodeCount nodes to NodeGroup (and, when
// balancing, to SimilarNodeGroups), helping Pods.
type Option struct {
	NodeGroup         cloudprovider.NodeGroup
	SimilarNodeGroups []cloudprovider.NodeGroup
	NodeCount         int
	Pods              []*apiv1.Pod
	Debug             string
}

// Filter keeps the best options (ties kept). nodeInfos maps node group Id()
// to the group's template NodeInfo. A Filter never modifies options; the
// slice it returns may be empty, which means no scale-up.
type Filter interface {
	BestOptions(ctx context.Context, options []Option, nodeInfos map[string]*cloudprovider.NodeInfo) []Option
}

// Strategy picks exactly one option (nil when options is empty).
type Strategy interface {
	BestOption(ctx context.Context, options []Option, nodeInfos map[string]*cloudprovider.NodeInfo) *Option
}

// NodeLister lists the cluster's nodes; corelisters.NodeLister satisfies it.
type NodeLister interface {
	List(selector labels.Selector) ([]*apiv1.Node, error)
}

// Deps are what some expanders need. Fields an expander of the chain does not
// use may be left zero.
type Deps struct {
	// Provider is the cloud provider; the price expander needs its Pricing().
	Provider cloudprovider.CloudProvider
	// Nodes lists the cluster's nodes; the price expander derives its
	// preferred node size from their number. When nil, it counts the target
	// sizes of the provider's node groups instead.
	Nodes NodeLister
	// ConfigMaps lists ConfigMaps of Namespace (--namespace); the priority
	// expander reads its ConfigMap through it on every call.
	ConfigMaps corelisters.ConfigMapNamespaceLister
	// Recorder receives the priority expander's Warning events about its
	// ConfigMap; nil disables them. Its scheme must know core/v1 (e.g.
	// k8s.io/client-go/kubernetes/scheme.Scheme), as lister objects carry no
	// kind.
	Recorder record.EventRecorder
	// Namespace is the namespace of the priority ConfigMap, for logs.
	Namespace string
	// Random returns a number in [0, n); nil means math/rand/v2.IntN. Tests
	// inject a deterministic one. It must be safe for concurrent use if the
	// chain is.
	Random func(n int) int
	// Clock places the price expander's one-hour window; nil means the real clock.
	Clock clock.PassiveClock
	// GRPC builds the grpc expander (package expander/grpc) with the filter
	// it falls back to (nil: the rest of the chain decides); needed only
	// when the chain has grpc.
	GRPC func(fallback Filter) (Filter, error)
}

func (d Deps) random() func(int) int {
	if d.Random != nil {
		return d.Random
	}
	return rand.IntN
}

func (d Deps) clock() clock.PassiveClock {
	if d.Clock != nil {
		return d.Clock
	}
	return clock.RealClock{}
}

// keepLowest returns the options with the lowest score, in their input order.
// score reports false for options that must be skipped; the result is empty
// when every option is skipped.
func keepLowest(options []Option, score func(Option) (float64, bool)) []Option {
	var best []Option
	var bestScore float64
	for _, o := range options {
		s, ok := score(o)
		switch {
		case !ok:
		case best == nil || s < bestScore:
			best, bestScore = []Option{o}, s
		case s == bestScore:
			best = append(best, o)
		}
	}
	return best
}

// groupID is the Id of o's node group, or "" when it has none.
func groupID(o Option) string {
	if o.NodeGroup == nil {
		return ""
	}
	return o.NodeGroup.Id()
}
