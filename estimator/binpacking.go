package estimator

import (
	"context"
	"errors"
	"fmt"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/template"
)

// Limits bound one estimate. Zero values mean "no limit" except MaxNodes.
type Limits struct {
	// MaxNodes is the most nodes the estimate may add: the smallest of the
	// group's room to its max size, the cluster's room to --max-nodes-total
	// and --max-nodes-per-scaleup.
	MaxNodes int
	// MaxMilliCPU and MaxMemoryBytes are the cluster's room to its resource
	// limits (--cores-total, --memory-total); 0 means unlimited.
	MaxMilliCPU    int64
	MaxMemoryBytes int64
	// Budget is the time the estimate may take (--max-nodegroup-binpacking-duration); 0 means unlimited.
	Budget time.Duration
}

// Limit names what stopped an estimate short of placing every pod.
type Limit string

// Limits an estimate can hit.
const (
	LimitNone     Limit = ""
	LimitMaxNodes Limit = "max-nodes"
	LimitCPU      Limit = "cpu"
	LimitMemory   Limit = "memory"
	LimitTime     Limit = "time"
)

// Estimate is how a node group would host pending pods.
type Estimate struct {
	// NodeCount is the number of new nodes that host at least one pod.
	NodeCount int
	// Scheduled are the pods the new nodes would host.
	Scheduled []*apiv1.Pod
	// Unschedulable maps pods a new node cannot host to the reason.
	Unschedulable map[*apiv1.Pod]error
	// LimitedBy says what stopped the estimate before every pod that fits a
	// template node was placed.
	LimitedBy Limit
}

// Estimator sizes scale-ups by simulating on template nodes.
type Estimator struct {
	sim   *framework.Handle
	clock clock.PassiveClock
}

// Option configures an Estimator.
type Option func(*Estimator)

// WithClock replaces the clock used for the time budget.
func WithClock(c clock.PassiveClock) Option { return func(e *Estimator) { e.clock = c } }

// New builds an estimator over the simulator's snapshot.
func New(sim *framework.Handle, opts ...Option) *Estimator {
	e := &Estimator{sim: sim, clock: clock.RealClock{}}
	for _, o := range opts {
		o(e)
	}
	return e
}

// errBudget stops an estimate at its time budget.
var errBudget = errors.New("time budget exhausted")

// run is the state of one estimate.
type run struct {
	e        *Estimator
	ctx      context.Context
	info     *cloudprovider.NodeInfo
	groupID  string
	limits   Limits
	deadline time.Time
	nodeCPU  int64
	nodeMem  int64
	classes  []nodeClass // the added nodes, in the order pods are offered to them
	total    int         // nodes the classes stand for: the nodes added
	clones   int         // template clones made, for unique names
	res      Estimate
}

// Estimate simulates groups on new nodes of the template info of node group
// groupID and reports how many nodes they need. The snapshot is forked and
// restored: the estimate leaves no trace.
func (e *Estimator) Estimate(ctx context.Context, groups []*Group, info *cloudprovider.NodeInfo, groupID string, limits Limits) (Estimate, error) {
	snap := e.sim.Snapshot()
	snap.Fork()
	defer snap.Revert()
	pods := 0
	for _, g := range groups {
		pods += len(g.Pods)
	}
	r := &run{e: e, ctx: ctx, info: info, groupID: groupID, limits: limits,
		res: Estimate{Scheduled: make([]*apiv1.Pod, 0, pods), Unschedulable: map[*apiv1.Pod]error{}}}
	if limits.Budget > 0 {
		r.deadline = e.clock.Now().Add(limits.Budget)
	}
	r.nodeCPU = info.Node.Status.Capacity.Cpu().MilliValue()
	r.nodeMem = info.Node.Status.Capacity.Memory().Value()
	for _, g := range groups {
		var err error
		if why := r.podByPod(g); why != "" {
			klog.FromContext(ctx).V(5).Info("Placing a group pod by pod", "pod", klog.KObj(g.Representative()),
				"count", len(g.Pods), "reason", why)
			err = r.placeOneByOne(g)
		} else {
			err = r.placeGroup(g)
		}
		if errors.Is(err, errBudget) {
			r.res.LimitedBy = LimitTime
			break
		}
		if err != nil {
			return Estimate{}, err
		}
	}
	r.res.NodeCount = r.total
	klog.FromContext(ctx).V(4).Info("Estimated node group", "nodeGroup", groupID, "nodes", r.res.NodeCount,
		"nodeClasses", len(r.classes), "scheduled", len(r.res.Scheduled), "unschedulable", len(r.res.Unschedulable),
		"limitedBy", r.res.LimitedBy)
	return r.res, nil
}

// limitAt names the limit, if any, that forbids adding one more node to n.
func (r *run) limitAt(n int) Limit {
	next := int64(n + 1)
	switch {
	case n >= r.limits.MaxNodes:
		return LimitMaxNodes
	case r.limits.MaxMilliCPU > 0 && next*r.nodeCPU > r.limits.MaxMilliCPU:
		return LimitCPU
	case r.limits.MaxMemoryBytes > 0 && next*r.nodeMem > r.limits.MaxMemoryBytes:
		return LimitMemory
	}
	return LimitNone
}

// room is how many nodes the limits still let the estimate add: the largest
// k such that limitAt allows each of them in turn.
func (r *run) room() int {
	most := int64(r.limits.MaxNodes)
	if r.limits.MaxMilliCPU > 0 && r.nodeCPU > 0 {
		most = min(most, r.limits.MaxMilliCPU/r.nodeCPU)
	}
	if r.limits.MaxMemoryBytes > 0 && r.nodeMem > 0 {
		most = min(most, r.limits.MaxMemoryBytes/r.nodeMem)
	}
	return int(max(most-int64(r.total), 0))
}

// podByPod says why g may not take the node-class path, if it may not: its
// pods constrain each other, or a plugin of the profile could judge them
// differently on equal nodes (volume limits and claims, default spread
// constraints, plugins not known to be pod-local).
func (r *run) podByPod(g *Group) string {
	if g.Interacting {
		return "pods constrain each other"
	}
	return r.e.sim.PodByPodReason(g.Representative())
}

// clone adds one template clone to the snapshot, standing for no node yet.
// The clone gets a copy of the CSINode registered for the template node, if
// any (see framework.Snapshot.SetCSINode).
func (r *run) clone() (string, error) {
	node, pods := template.Clone(r.info, r.groupID, r.clones)
	snap := r.e.sim.Snapshot()
	if err := snap.AddNode(node, pods...); err != nil {
		return "", fmt.Errorf("adding template node: %w", err)
	}
	if c, ok := snap.CSINode(r.info.Node.Name); ok && c != nil {
		snap.SetCSINode(node.Name, framework.RenamedCSINode(c, node.Name))
	}
	if len(r.info.ResourceSlices) > 0 {
		snap.SetResourceSlices(node.Name, framework.RenamedResourceSlices(r.info.ResourceSlices, r.info.Node.Name, node.Name))
	}
	r.clones++
	return node.Name, nil
}

// twin adds a copy of the snapshot node src, under a new template name.
func (r *run) twin(src string) (string, error) {
	node, _ := template.Clone(r.info, r.groupID, r.clones)
	if err := r.e.sim.Snapshot().CopyNode(src, node); err != nil {
		return "", fmt.Errorf("copying template node: %w", err)
	}
	r.clones++
	return node.Name, nil
}

// nextNode adds a single template node unless a limit forbids it; ok is
// false, and the limit recorded, when one does.
func (r *run) nextNode() (name string, ok bool, err error) {
	if limit := r.limitAt(r.total); limit != LimitNone {
		r.res.LimitedBy = limit
		return "", false, nil
	}
	if name, err = r.clone(); err != nil {
		return "", false, err
	}
	r.classes = append(r.classes, nodeClass{node: name, count: 1})
	r.total++
	return name, true, nil
}

// dropLastNode takes the node just added by nextNode, still empty, back out
// so that it is neither counted nor offered to later pods.
func (r *run) dropLastNode() error {
	last := r.classes[len(r.classes)-1]
	r.classes = r.classes[:len(r.classes)-1]
	r.total -= last.count
	return r.e.sim.Snapshot().RemoveNode(last.node)
}

func (r *run) checkBudget() error {
	if !r.deadline.IsZero() && r.e.clock.Now().After(r.deadline) {
		return errBudget
	}
	return r.ctx.Err()
}

// roomFor is the snapshot's cheap pre-check, before the Filter plugins.
func (r *run) roomFor(node string, req framework.Request) bool {
	return r.e.sim.Snapshot().HasRoom(node, req)
}

// placeOneByOne places pods that constrain each other (or that the plugins
// might judge differently on equal nodes), each after asking the
// plugins about every added node, adding a node when none fits. The pods
// must see every node as it is, so node classes are first expanded into
// single nodes.
func (r *run) placeOneByOne(g *Group) error {
	if err := r.materialise(); err != nil {
		return err
	}
	snap := r.e.sim.Snapshot()
	for i, p := range g.Pods {
		if err := r.checkBudget(); err != nil {
			return err
		}
		check := r.e.sim.Prepare(r.ctx, p)
		if err := check.Err(); err != nil {
			r.unschedulable(g.Pods[i:i+1], err)
			continue
		}
		placed := false
		req := framework.RequestOf(p)
		for _, c := range r.classes {
			if r.roomFor(c.node, req) && check.Fits(r.ctx, c.node) == nil {
				if err := snap.AddPod(p, c.node); err != nil {
					return err
				}
				placed = true
				break
			}
		}
		if placed {
			r.res.Scheduled = append(r.res.Scheduled, p)
			continue
		}
		node, ok, err := r.nextNode()
		if !ok {
			return err
		}
		// The node is new: PreFilter results may depend on the node set.
		check = r.e.sim.Prepare(r.ctx, p)
		if err := check.Fits(r.ctx, node); err != nil {
			r.unschedulable(g.Pods[i:i+1], err)
			if err := r.dropLastNode(); err != nil {
				return err
			}
			continue
		}
		if err := snap.AddPod(p, node); err != nil {
			return err
		}
		r.res.Scheduled = append(r.res.Scheduled, p)
	}
	return nil
}

func (r *run) unschedulable(pods []*apiv1.Pod, reason error) {
	for _, p := range pods {
		r.res.Unschedulable[p] = reason
	}
}
