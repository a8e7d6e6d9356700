package scaledown

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"sort"
	"strings"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/metrics"
)

// ClusterWide is the name of the Minimum the flags set (upstream's ID of
// the cloud provider's resource limiter).
const ClusterWide = "cluster-wide"

// NodesResource counts nodes in a Minimum, as "nodes" does in a
// CapacityQuota.
const NodesResource apiv1.ResourceName = "nodes"

// virtualKubeletLabel marks virtual-kubelet nodes (label type), which
// count toward no minimum, as upstream leaves them out of its quota usage.
const virtualKubeletLabel, virtualKubeletValue = "type", "virtual-kubelet"

// Minimum is a floor under the summed resources of the nodes it picks:
// scale-down removes no node whose removal would take one of the picked
// sums below it. Several nodes removed in one loop count together.
type Minimum struct {
	// Name names the minimum in logs and in the kept node's detail.
	Name string
	// Selector picks the nodes it counts; nil picks every node.
	Selector labels.Selector
	// Resources are the floors per resource in the units amount counts
	// in: cpu in millicores, NodesResource in nodes, anything else (memory,
	// extended resources) in whole units of the nodes' capacity.
	Resources map[apiv1.ResourceName]int64
	// GPUs are the floors per GPU type (the provider's GPU type of a
	// node, as --gpu-total names it), in devices.
	GPUs map[string]int64
}

// MinimumSource gives, every loop, the minimums a fork adds to the flags'
// (WithMinimums). An error keeps every node that would go this loop.
type MinimumSource interface {
	Minimums(ctx context.Context) ([]Minimum, error)
}

// WithMinimums adds src's minimums to the cluster-wide one of
// --cores-total, --memory-total and --gpu-total.
func WithMinimums(src MinimumSource) PlannerOption {
	return func(p *Planner) { p.minimums = src }
}

// maxMilli is the largest quantity a floor may hold in milli-units.
const maxMilli = math.MaxInt64 / 1000

// NewMinimum validates a minimum given as quantities: a selector that
// parses (nil: every node), no negative, fractional (but cpu) or too
// large quantity, GPU types named. Every problem is reported.
func NewMinimum(name string, selector *metav1.LabelSelector, resources apiv1.ResourceList,
	gpus map[string]int64) (Minimum, error) {
	m := Minimum{Name: name, Resources: map[apiv1.ResourceName]int64{}, GPUs: map[string]int64{}}
	var errs []error
	if name == "" {
		errs = append(errs, errors.New("the minimum has no name"))
	}
	if selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(selector)
		if err != nil {
			errs = append(errs, fmt.Errorf("selector: %w", err))
		}
		m.Selector = sel
	}
	names := make([]string, 0, len(resources))
	for res := range resources {
		names = append(names, string(res))
	}
	sort.Strings(names)
	for _, res := range names {
		q := resources[apiv1.ResourceName(res)]
		switch {
		case q.Sign() < 0:
			errs = append(errs, fmt.Errorf("resources[%s]: %s is negative", res, q.String()))
		case q.CmpInt64(maxMilli) > 0:
			errs = append(errs, fmt.Errorf("resources[%s]: %s is too large", res, q.String()))
		case res == string(apiv1.ResourceCPU):
			m.Resources[apiv1.ResourceCPU] = q.MilliValue()
		case q.MilliValue()%1000 != 0:
			errs = append(errs, fmt.Errorf("resources[%s]: %s is not a whole number", res, q.String()))
		default:
			m.Resources[apiv1.ResourceName(res)] = q.Value()
		}
	}
	for gpu, n := range gpus {
		switch {
		case gpu == "":
			errs = append(errs, errors.New("gpus: a GPU type is empty"))
		case n < 0:
			errs = append(errs, fmt.Errorf("gpus[%s]: %d is negative", gpu, n))
		default:
			m.GPUs[gpu] = n
		}
	}
	if len(errs) > 0 {
		return Minimum{}, fmt.Errorf("minimum %q: %w", name, errors.Join(errs...))
	}
	return m, nil
}

// clusterWide is the minimum of --cores-total, --memory-total and
// --gpu-total; a minimum of 0 is none.
func (o Options) clusterWide() Minimum {
	m := Minimum{Name: ClusterWide, Resources: map[apiv1.ResourceName]int64{}, GPUs: map[string]int64{}}
	if o.Cores.Min > 0 {
		m.Resources[apiv1.ResourceCPU] = o.Cores.Min * 1000
	}
	if o.MemoryGiB.Min > 0 {
		m.Resources[apiv1.ResourceMemory] = o.MemoryGiB.Min << 30
	}
	for _, l := range o.GPUTotal {
		if l.Min > 0 {
			m.GPUs[l.Type] = l.Min
		}
	}
	return m
}

func (m Minimum) picks(n *apiv1.Node) bool {
	return m.Selector == nil || m.Selector.Matches(labels.Set(n.Labels))
}

func (m Minimum) empty() bool { return len(m.Resources) == 0 && len(m.GPUs) == 0 }

// amount is how much of res a node has, in a Minimum's units.
func amount(n *apiv1.Node, res apiv1.ResourceName) int64 {
	switch res {
	case NodesResource:
		return 1
	case apiv1.ResourceCPU:
		return n.Status.Capacity.Cpu().MilliValue()
	}
	v, ok := n.Status.Capacity[res]
	if !ok {
		return 0
	}
	return v.Value()
}

func isVirtualKubelet(n *apiv1.Node) bool {
	return n.Labels[virtualKubeletLabel] == virtualKubeletValue
}

// headroom is what the staying nodes a Minimum picks have above it.
type headroom struct {
	min  Minimum
	left map[apiv1.ResourceName]int64
	gpus map[string]int64
}

// floors are the loop's minimums with the headroom left above each; the
// removals picked so far have taken theirs.
type floors struct {
	all   []*headroom
	gpuOf func(*apiv1.Node) (string, int64)
	// failed holds why the minimums could not be read: every node is kept.
	failed error
}

// floorsLeft counts, for the cluster-wide and the forks' minimums, what
// the nodes that stay (not being deleted already) have above each.
func (p *Planner) floorsLeft(ctx context.Context, in Input) *floors {
	f := &floors{}
	mins := []Minimum{p.opts.clusterWide()}
	if p.minimums != nil {
		extra, err := p.minimums.Minimums(ctx)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Reading the scale-down minimums failed; no node is removed this loop")
			f.failed = err
			return f
		}
		mins = append(mins, extra...)
	}
	for _, m := range mins {
		if m.empty() {
			continue
		}
		h := &headroom{min: m, left: map[apiv1.ResourceName]int64{}, gpus: map[string]int64{}}
		for res, v := range m.Resources {
			h.left[res] = -v
		}
		for gpu, v := range m.GPUs {
			h.gpus[gpu] = -v
			if f.gpuOf == nil {
				f.gpuOf = p.gpusOf(in.Session)
			}
		}
		f.all = append(f.all, h)
	}
	for _, n := range in.Nodes {
		if hasTaint(n, ToBeDeletedTaint) || in.deleting[n.Name] != "" || in.deleted[n.Name] || isVirtualKubelet(n) {
			continue
		}
		gpu, gpus := f.gpus(n)
		for _, h := range f.all {
			if !h.min.picks(n) {
				continue
			}
			for res := range h.left {
				h.left[res] += amount(n, res)
			}
			if _, limited := h.gpus[gpu]; limited {
				h.gpus[gpu] += gpus
			}
		}
	}
	return f
}

func (f *floors) gpus(n *apiv1.Node) (string, int64) {
	if f.gpuOf == nil {
		return "", 0
	}
	return f.gpuOf(n)
}

// take removes node's resources from every minimum that picks it when
// none would go below; otherwise it takes nothing and says which minimums
// and resources keep the node ("cluster-wide: cpu"). The cluster-wide
// cpu and memory minimums count a skipped scale-down each time they keep
// a node, as upstream did before its quota tracker.
func (f *floors) take(node *apiv1.Node, report Reporter) []string {
	if isVirtualKubelet(node) {
		return nil
	}
	gpu, gpus := f.gpus(node)
	var over []string
	for _, h := range f.all {
		if !h.min.picks(node) {
			continue
		}
		var res []string
		for r, left := range h.left {
			if a := amount(node, r); a > 0 && left < a {
				res = append(res, string(r))
			}
		}
		if left, limited := h.gpus[gpu]; limited && gpus > 0 && left < gpus {
			res = append(res, gpu)
		}
		if len(res) == 0 {
			continue
		}
		sort.Strings(res)
		over = append(over, h.min.Name+": "+strings.Join(res, ", "))
		if h.min.Name == ClusterWide && report != nil {
			for _, r := range res {
				switch apiv1.ResourceName(r) {
				case apiv1.ResourceCPU:
					report.RegisterSkippedScaleEvent(metrics.DirectionScaleDown, metrics.CPUResourceLimit)
				case apiv1.ResourceMemory:
					report.RegisterSkippedScaleEvent(metrics.DirectionScaleDown, metrics.MemoryResourceLimit)
				}
			}
		}
	}
	if len(over) > 0 {
		return over
	}
	for _, h := range f.all {
		if !h.min.picks(node) {
			continue
		}
		for r := range h.left {
			h.left[r] -= amount(node, r)
		}
		if _, limited := h.gpus[gpu]; limited {
			h.gpus[gpu] -= gpus
		}
	}
	return nil
}

// takeAll takes all of nodes or, when a minimum keeps one of them, none.
func (f *floors) takeAll(nodes []*apiv1.Node, report Reporter) []string {
	saved := make([]headroom, len(f.all))
	for i, h := range f.all {
		saved[i] = headroom{min: h.min, left: maps.Clone(h.left), gpus: maps.Clone(h.gpus)}
	}
	for _, n := range nodes {
		if over := f.take(n, report); len(over) > 0 {
			for i := range f.all {
				*f.all[i] = saved[i]
			}
			return over
		}
	}
	return nil
}
