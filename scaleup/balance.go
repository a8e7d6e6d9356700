package scaleup

import (
	"context"
	"sort"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/estimator"
	"k8s.io/autoscaler/cluster-autoscaler/expander"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/template"
)

// ignoredForSimilarity are labels that differ between node groups that are
// otherwise the same machines: the node's own name and its zone.
var ignoredForSimilarity = map[string]bool{
	apiv1.LabelHostname:                                       true,
	apiv1.LabelTopologyZone:                                   true,
	apiv1.LabelFailureDomainBetaZone:                          true,
	"topology.ebs.csi.aws.com/zone":                           true,
	"topology.gke.io/zone":                                    true,
	"beta.kubernetes.io/fluentd-ds-ready":                     true,
	"kubernetes.azure.com/agentpool":                          true,
	"eks.amazonaws.com/nodegroup":                             true,
	"cloud.google.com/gke-nodepool":                           true,
	template.TemplateNodeLabel:                                true,
	"node.kubernetes.io/exclude-from-external-load-balancers": true,
}

// similarity decides whether two node groups' templates are the same kind of
// machine, for --balance-similar-node-groups.
type similarity struct {
	labels      []string        // --balancing-label: when set, only these decide
	ignore      map[string]bool // --balancing-ignore-label and the built-in set
	allocatable float64
	free        float64
	memory      float64
}

func newSimilarity(o Options) *similarity {
	s := &similarity{labels: o.BalancingLabels, ignore: map[string]bool{}, allocatable: o.MaxAllocatableDifferenceRatio,
		free: o.MaxFreeDifferenceRatio, memory: o.MemoryDifferenceRatio}
	for k := range ignoredForSimilarity {
		s.ignore[k] = true
	}
	for _, k := range o.BalancingIgnoreLabels {
		s.ignore[k] = true
	}
	return s
}

// similar reports whether a and b are interchangeable. With balancing
// labels, they are when every such label is present on both with the same
// value. Otherwise capacities must be equal (memory within its ratio),
// allocatable and free resources within theirs, and the labels equal but
// for the ignored ones.
func (s *similarity) similar(a, b *cloudprovider.NodeInfo) bool {
	if a == nil || b == nil || a.Node == nil || b.Node == nil {
		return false
	}
	na, nb := a.Node, b.Node
	if len(s.labels) > 0 {
		for _, k := range s.labels {
			va, oka := na.Labels[k]
			vb, okb := nb.Labels[k]
			if !oka || !okb || va != vb {
				return false
			}
		}
		return true
	}
	if len(na.Status.Capacity) != len(nb.Status.Capacity) {
		return false
	}
	for name, qa := range na.Status.Capacity {
		qb, ok := nb.Status.Capacity[name]
		if !ok {
			return false
		}
		if name == apiv1.ResourceMemory {
			if !within(qa, qb, s.memory) {
				return false
			}
		} else if qa.Cmp(qb) != 0 {
			return false
		}
	}
	if !withinAll(na.Status.Allocatable, nb.Status.Allocatable, s.allocatable) {
		return false
	}
	if !withinAll(free(a), free(b), s.free) {
		return false
	}
	return s.sameLabels(na.Labels, nb.Labels)
}

func (s *similarity) sameLabels(a, b map[string]string) bool {
	count := func(m map[string]string) int {
		n := 0
		for k := range m {
			if !s.ignore[k] {
				n++
			}
		}
		return n
	}
	if count(a) != count(b) {
		return false
	}
	for k, va := range a {
		if s.ignore[k] {
			continue
		}
		if vb, ok := b[k]; !ok || vb != va {
			return false
		}
	}
	return true
}

// free is the template's allocatable less what its start-up pods request.
func free(info *cloudprovider.NodeInfo) apiv1.ResourceList {
	out := info.Node.Status.Allocatable.DeepCopy()
	for _, p := range info.Pods {
		req := framework.RequestOf(p)
		for name, q := range out {
			var used int64
			switch name {
			case apiv1.ResourceCPU:
				used = req.MilliCPU
				q.SetMilli(q.MilliValue() - used)
			case apiv1.ResourceMemory:
				used = req.Memory
				q.Set(q.Value() - used)
			default:
				continue
			}
			out[name] = q
		}
	}
	return out
}

// withinAll compares every resource either list has.
func withinAll(a, b apiv1.ResourceList, ratio float64) bool {
	for name, qa := range a {
		if !within(qa, b[name], ratio) {
			return false
		}
	}
	for name, qb := range b {
		if _, ok := a[name]; !ok && !qb.IsZero() {
			return false
		}
	}
	return true
}

// within reports whether a and b differ by at most ratio of the smaller.
func within(a, b resource.Quantity, ratio float64) bool {
	fa, fb := a.AsApproximateFloat64(), b.AsApproximateFloat64()
	lo, hi := min(fa, fb), max(fa, fb)
	return hi-lo <= lo*ratio
}

// share is one group's part of a balanced scale-up.
type share struct {
	gs    *groupState
	delta int
}

// balance spreads the chosen option over the chosen group and the options of
// groups similar to it, so that their sizes stay as even as their max sizes
// allow: each node goes to the group that is smallest at that point (ties
// by id). The pods are estimated again against the room of all those groups
// together, so that a small group chosen first does not cap the scale-up.
// It returns the shares and the pods they serve. Without balancing, or
// without similar groups, the chosen group takes the option as it is.
func (o *Orchestrator) balance(ctx context.Context, best *expander.Option, options []expander.Option,
	groups map[string]*groupState, podGroups []*estimator.Group, t *totals) ([]share, []*apiv1.Pod) {
	chosen := groups[best.NodeGroup.Id()]
	members := []*groupState{chosen}
	// A zeroOrMaxNodeScaling group is never part of a balanced share: it
	// takes all of its nodes or none.
	if o.opts.BalanceSimilarNodeGroups && !chosen.zeroOrMax {
		sim := newSimilarity(o.opts)
		for _, opt := range options {
			gs := groups[opt.NodeGroup.Id()]
			if gs == chosen || gs.skip != "" || gs.zeroOrMax {
				continue
			}
			if sim.similar(chosen.template, gs.template) {
				members = append(members, gs)
			}
		}
	}
	if len(members) == 1 {
		return []share{{gs: chosen, delta: best.NodeCount}}, best.Pods
	}
	count, pods := best.NodeCount, best.Pods
	room := 0
	for _, gs := range members {
		room += max(0, gs.group.MaxSize()-gs.target)
	}
	limits := estimator.Limits{
		MaxNodes:       min(room, o.opts.MaxNodesPerScaleUp, t.nodeRoom(o.opts.MaxNodesTotal)),
		MaxMilliCPU:    t.cpuRoom(o.opts.Cores.Max),
		MaxMemoryBytes: t.memoryRoom(o.opts.MemoryGiB.Max),
		Budget:         o.opts.MaxNodeGroupBinpackingDuration,
	}
	if est, err := o.estimator.Estimate(ctx, podGroups, chosen.template, chosen.group.Id(), limits); err == nil &&
		est.NodeCount > 0 && len(est.Scheduled) >= len(pods) {
		count, pods = est.NodeCount, est.Scheduled
	}
	sort.Slice(members, func(i, j int) bool { return members[i].group.Id() < members[j].group.Id() })
	deltas := make([]int, len(members))
	// after counts the nodes given out so far against the CapacityQuotas.
	after := t.clone()
	for n := 0; n < count; n++ {
		pick := -1
		for i, gs := range members {
			size := gs.target + deltas[i]
			if size >= gs.group.MaxSize() {
				continue
			}
			if gs.template != nil {
				if qRoom, _, limited := after.quotaRoom(gs.template.Node); limited && qRoom <= 0 {
					continue
				}
			}
			if pick < 0 || size < members[pick].target+deltas[pick] {
				pick = i
			}
		}
		if pick < 0 {
			break // every similar group is full
		}
		deltas[pick]++
		if tmpl := members[pick].template; tmpl != nil && len(after.quotas) > 0 {
			after.addNode(tmpl.Node, tmpl.ResourceSlices)
		}
	}
	var out []share
	for i, gs := range members {
		if deltas[i] > 0 {
			out = append(out, share{gs: gs, delta: deltas[i]})
		}
	}
	return out, pods
}
