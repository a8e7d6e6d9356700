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
	nodes    []string // added template nodes, in order
	hasPods  map[string]bool
	shape    *framework.PodShape // of the group being placed, when its pods are alike
	res      Estimate
}

// Estimate simulates groups on new nodes of the template info of node group
// groupID and reports how many nodes they need. The snapshot is forked and
// restored: the estimate leaves no trace.
func (e *Estimator) Estimate(ctx context.Context, groups []*Group, info *cloudprovider.NodeInfo, groupID string, limits Limits) (Estimate, error) {
	snap := e.sim.Snapshot()
	snap.Fork()
	defer snap.Revert()
	r := &run{e: e, ctx: ctx, info: info, groupID: groupID, limits: limits, hasPods: map[string]bool{},
		res: Estimate{Unschedulable: map[*apiv1.Pod]error{}}}
	if limits.Budget > 0 {
		r.deadline = e.clock.Now().Add(limits.Budget)
	}
	r.nodeCPU = info.Node.Status.Capacity.Cpu().MilliValue()
	r.nodeMem = info.Node.Status.Capacity.Memory().Value()
	for _, g := range groups {
		var err error
		if g.Interacting {
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
	r.res.NodeCount = len(r.hasPods)
	klog.FromContext(ctx).V(4).Info("Estimated node group", "nodeGroup", groupID, "nodes", r.res.NodeCount,
		"scheduled", len(r.res.Scheduled), "unschedulable", len(r.res.Unschedulable), "limitedBy", r.res.LimitedBy)
	return r.res, nil
}

// canAddNode checks the limits for one more node and names the one hit.
func (r *run) canAddNode() Limit {
	n := int64(len(r.nodes) + 1)
	switch {
	case len(r.nodes) >= r.limits.MaxNodes:
		return LimitMaxNodes
	case r.limits.MaxMilliCPU > 0 && n*r.nodeCPU > r.limits.MaxMilliCPU:
		return LimitCPU
	case r.limits.MaxMemoryBytes > 0 && n*r.nodeMem > r.limits.MaxMemoryBytes:
		return LimitMemory
	}
	return LimitNone
}

// nextNode adds a template node unless a limit forbids it; ok is false,
// and the limit recorded, when one does.
func (r *run) nextNode() (name string, ok bool, err error) {
	if limit := r.canAddNode(); limit != LimitNone {
		r.res.LimitedBy = limit
		return "", false, nil
	}
	name, err = r.addNode()
	return name, err == nil, err
}

// dropLastNode takes the node just added, still empty, back out so that it is
// neither counted nor offered to later pods.
func (r *run) dropLastNode() error {
	last := r.nodes[len(r.nodes)-1]
	r.nodes = r.nodes[:len(r.nodes)-1]
	return r.e.sim.Snapshot().RemoveNode(last)
}

// addNode adds one template clone to the snapshot.
func (r *run) addNode() (string, error) {
	node, pods := template.Clone(r.info, r.groupID, len(r.nodes))
	if err := r.e.sim.Snapshot().AddNode(node, pods...); err != nil {
		return "", fmt.Errorf("adding template node: %w", err)
	}
	r.nodes = append(r.nodes, node.Name)
	return node.Name, nil
}

func (r *run) place(p *apiv1.Pod, node string) error {
	var err error
	if r.shape != nil {
		err = r.e.sim.Snapshot().AddPodShaped(r.shape, p, node)
	} else {
		err = r.e.sim.Snapshot().AddPod(p, node)
	}
	if err != nil {
		return err
	}
	r.hasPods[node] = true
	r.res.Scheduled = append(r.res.Scheduled, p)
	return nil
}

func (r *run) checkBudget() error {
	if !r.deadline.IsZero() && r.e.clock.Now().After(r.deadline) {
		return errBudget
	}
	return r.ctx.Err()
}

// placeGroup places a group whose pods do not interact: fill the room left
// on nodes already added, learn how many pods fit one fresh node, then add
// whole nodes of that many pods without asking the plugins again, since every
// fresh clone and every member of the group are alike.
func (r *run) placeGroup(g *Group) error {
	check := r.e.sim.Prepare(r.ctx, g.Representative())
	if err := check.Err(); err != nil {
		r.unschedulable(g.Pods, err)
		return nil
	}
	req := framework.RequestOf(g.Representative())
	shape, err := framework.NewPodShape(g.Representative())
	if err != nil {
		return err
	}
	r.shape = shape
	defer func() { r.shape = nil }()
	pending := g.Pods
	for _, node := range r.nodes {
		for len(pending) > 0 && r.roomFor(node, req) && check.Fits(r.ctx, node) == nil {
			if err := r.place(pending[0], node); err != nil {
				return err
			}
			pending = pending[1:]
		}
		if len(pending) == 0 {
			return nil
		}
		if err := r.checkBudget(); err != nil {
			return err
		}
	}
	// One fresh node, filled by simulation: perNode pods fit on it.
	first, ok, err := r.nextNode()
	if !ok {
		return err
	}
	perNode := 0
	var reason error
	for len(pending) > 0 {
		if reason = check.Fits(r.ctx, first); reason != nil {
			break
		}
		if err := r.place(pending[0], first); err != nil {
			return err
		}
		pending = pending[1:]
		perNode++
	}
	if perNode == 0 {
		r.unschedulable(pending, reason)
		return r.dropLastNode()
	}
	// The rest, in whole nodes of perNode pods each.
	for len(pending) > 0 {
		node, ok, err := r.nextNode()
		if !ok {
			return err
		}
		n := min(perNode, len(pending))
		for _, p := range pending[:n] {
			if err := r.place(p, node); err != nil {
				return err
			}
		}
		pending = pending[n:]
		if err := r.checkBudget(); err != nil {
			return err
		}
	}
	return nil
}

// roomFor is the snapshot's cheap pre-check, before the Filter plugins.
func (r *run) roomFor(node string, req framework.Request) bool {
	return r.e.sim.Snapshot().HasRoom(node, req)
}

// placeOneByOne places pods that constrain each other, each after asking the
// plugins about every added node, adding a node when none fits.
func (r *run) placeOneByOne(g *Group) error {
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
		for _, node := range r.nodes {
			if r.roomFor(node, req) && check.Fits(r.ctx, node) == nil {
				if err := r.place(p, node); err != nil {
					return err
				}
				placed = true
				break
			}
		}
		if placed {
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
		if err := r.place(p, node); err != nil {
			return err
		}
	}
	return nil
}

func (r *run) unschedulable(pods []*apiv1.Pod, reason error) {
	for _, p := range pods {
		r.res.Unschedulable[p] = reason
	}
}
