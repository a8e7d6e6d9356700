package estimator

import (
	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

// nodeClass stands for count identical added nodes. Only node is in the
// snapshot; each of the others runs as many pods of each group as node does
// (other members of the same groups), so the Filter plugins would answer
// alike for all of them, as long as no pod on them interacts with others.
// A group that does not interact is placed on a class as a whole: the plugins
// are asked once how many of its pods fit node, and that many go to each of
// the count nodes; the class is split only where the group ends inside it.
type nodeClass struct {
	node  string
	count int
}

// placeGroup places a group whose pods do not interact, first fit in the
// order nodes were added, as placing its pods one by one would: fill the room
// left on the classes already added, then learn how many pods fit one fresh
// node and add as many fresh nodes of that many pods as the rest needs.
func (r *run) placeGroup(g *Group) error {
	check := r.e.sim.Prepare(r.ctx, g.Representative())
	if err := check.Err(); err != nil {
		r.unschedulable(g.Pods, err)
		return nil
	}
	shape, err := framework.NewPodShape(g.Representative())
	if err != nil {
		return err
	}
	p := &placement{check: check, shape: shape, req: framework.RequestOf(g.Representative())}
	pending := g.Pods
	for i := 0; i < len(r.classes); i++ {
		n, err := r.fillClass(i, p, pending)
		if err != nil {
			return err
		}
		pending = pending[n:]
		if len(pending) == 0 {
			return nil
		}
		if err := r.checkBudget(); err != nil {
			return err
		}
	}
	return r.addClasses(p, pending)
}

// placement is what placing one group needs: its PreFilter result, the
// shape its pods share, and their requests for the cheap room check.
type placement struct {
	check *framework.PodCheck
	shape *framework.PodShape
	req   framework.Request
}

// fillClass places the first pods of pending on class i, q on each of its
// nodes where the plugins accept q pods of the group on one of them, and
// returns how many it placed. When pending runs out inside the class, the
// class is split in order: the nodes that take q pods, at most one that
// takes the rest, and those left as they were.
func (r *run) fillClass(i int, p *placement, pending []*apiv1.Pod) (int, error) {
	c := r.classes[i]
	if !r.roomFor(c.node, p.req) {
		return 0, nil
	}
	q, _ := p.check.FitCount(r.ctx, p.shape, pending, c.node, &p.req)
	if q == 0 {
		return 0, nil
	}
	snap := r.e.sim.Snapshot()
	if q*c.count <= len(pending) {
		if err := snap.AddPodsShaped(p.shape, pending[:q], c.node); err != nil {
			return 0, err
		}
		r.scheduled(pending[:q*c.count])
		return q * c.count, nil
	}
	full, rest := len(pending)/q, len(pending)%q // full >= 1, as q <= len(pending)
	untouched := c.count - full
	var split []nodeClass
	if rest > 0 {
		untouched--
		node, err := r.twin(c.node)
		if err != nil {
			return 0, err
		}
		if err := snap.AddPodsShaped(p.shape, pending[full*q:], node); err != nil {
			return 0, err
		}
		split = append(split, nodeClass{node: node, count: 1})
	}
	if untouched > 0 {
		node, err := r.twin(c.node) // before c.node takes the group's pods
		if err != nil {
			return 0, err
		}
		split = append(split, nodeClass{node: node, count: untouched})
	}
	if err := snap.AddPodsShaped(p.shape, pending[:q], c.node); err != nil {
		return 0, err
	}
	r.classes[i].count = full
	r.classes = append(r.classes[:i+1], append(split, r.classes[i+1:]...)...)
	r.scheduled(pending)
	return len(pending), nil
}

// addClasses places pending on fresh nodes: one is filled by simulation to
// learn how many pods fit (perNode), then every fresh node takes perNode pods
// but the last, which takes the rest, as far as the limits allow. Fresh
// nodes are alike and so are the pods: the plugins are not asked again.
func (r *run) addClasses(p *placement, pending []*apiv1.Pod) error {
	if limit := r.limitAt(r.total); limit != LimitNone {
		r.res.LimitedBy = limit
		return nil
	}
	first, err := r.clone()
	if err != nil {
		return err
	}
	perNode, reason := p.check.FitCount(r.ctx, p.shape, pending, first, nil)
	if perNode == 0 {
		r.unschedulable(pending, reason)
		return r.e.sim.Snapshot().RemoveNode(first)
	}
	snap := r.e.sim.Snapshot()
	room := r.room() // >= 1: limitAt allowed one more
	full := min(len(pending)/perNode, room)
	if err := snap.AddPodsShaped(p.shape, pending[:perNode], first); err != nil {
		return err
	}
	r.classes = append(r.classes, nodeClass{node: first, count: full})
	r.total += full
	placed := full * perNode
	if placed < len(pending) {
		if full < room { // then the rest is less than perNode
			last, err := r.clone()
			if err != nil {
				return err
			}
			if err := snap.AddPodsShaped(p.shape, pending[placed:], last); err != nil {
				return err
			}
			r.classes = append(r.classes, nodeClass{node: last, count: 1})
			r.total++
			placed = len(pending)
		} else {
			r.res.LimitedBy = r.limitAt(r.total)
		}
	}
	r.scheduled(pending[:placed])
	return r.checkBudget()
}

// materialise gives every node a class of its own, each in the snapshot as a
// twin of its class's node, for groups that must see each node as it is. It
// costs what adding those nodes one by one did before node classes.
func (r *run) materialise() error {
	if len(r.classes) == r.total {
		return nil
	}
	out := make([]nodeClass, 0, r.total)
	for _, c := range r.classes {
		out = append(out, nodeClass{node: c.node, count: 1})
		for j := 1; j < c.count; j++ {
			node, err := r.twin(c.node)
			if err != nil {
				return err
			}
			out = append(out, nodeClass{node: node, count: 1})
			if len(out)%1024 == 0 {
				if err := r.checkBudget(); err != nil {
					return err // the estimate stops here: the classes need not be consistent
				}
			}
		}
	}
	r.classes = out
	return nil
}

func (r *run) scheduled(pods []*apiv1.Pod) {
	r.res.Scheduled = append(r.res.Scheduled, pods...)
}
