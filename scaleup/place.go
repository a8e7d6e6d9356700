package scaleup

import (
	"context"
	"slices"
	"strings"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/estimator"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

// Placing pods on the nodes the snapshot already has (existing and
// upcoming): pending pods before any scale-up, and the pods of
// ProvisioningRequests (Place holds capacity, FitAll checks it).

// Place puts on the snapshot the pods that fit existing or upcoming nodes
// (only registered ones when realOnly) and returns the others. Nothing is
// scaled. Use it to hold capacity already promised to someone. Each of sets
// holds pods the caller vouches are equivalent (one owner, one scheduling
// spec: the pods built for one ProvisioningRequest PodSet); a set is placed
// as one equivalence group, its pods are not compared.
func (s *Session) Place(ctx context.Context, sets [][]*apiv1.Pod, realOnly bool) []*apiv1.Pod {
	rest, _ := s.PlaceOn(ctx, sets, realOnly)
	return rest
}

// PlaceOn is Place that also names the nodes it placed pods on, in name
// order.
func (s *Session) PlaceOn(ctx context.Context, sets [][]*apiv1.Pod, realOnly bool) ([]*apiv1.Pod, []string) {
	placed, tell := s.o.placements()
	on := map[string]bool{}
	rest, _ := s.o.fitGroupsTold(ctx, s.o.groupsOf(sets), realOnly, func(node string, n int) {
		on[node] = true
		if tell != nil {
			tell(node, n)
		}
	}, time.Time{})
	s.o.recordCheck(ctx, slices.Concat(sets...), rest, placed, realOnly, true, nil)
	names := make([]string, 0, len(on))
	for n := range on {
		names = append(names, n)
	}
	slices.Sort(names)
	return rest, names
}

// placements counts, when the explainer is on, the pods placed on each
// node (tell is nil when it is off).
func (o *Orchestrator) placements() (map[string]int, func(string, int)) {
	if o.explain == nil {
		return nil, nil
	}
	placed := map[string]int{}
	return placed, func(node string, n int) { placed[node] += n }
}

// FitAll places all pods of sets on existing or upcoming nodes (only
// registered ones when realOnly) or none of them, and reports which. sets
// are as for Place. When they do not all fit and realOnly, refusal says
// why the first pod left fits no node, in a few words for a condition
// message (firstRefusal): "no node offers 8 devices of class
// gpu.example.com"; it is "" when no node refused it (the cluster may
// have none).
func (s *Session) FitAll(ctx context.Context, sets [][]*apiv1.Pod, realOnly bool) (fit bool, refusal string) {
	snap := s.o.sim.Snapshot()
	snap.Fork()
	placed, tell := s.o.placements()
	rest, _ := s.o.fitGroupsTold(ctx, s.o.groupsOf(sets), realOnly, tell, time.Time{})
	// Asked before the revert: the refusals see the nodes as the
	// request's other pods left them.
	refused := s.o.refusalsOf(ctx, rest, realOnly)
	s.o.recordCheck(ctx, slices.Concat(sets...), rest, placed, realOnly, len(rest) == 0, refused)
	if len(rest) > 0 {
		snap.Revert()
		return false, firstRefusal(refused)
	}
	snap.Commit()
	return true, ""
}

// groupsOf makes an equivalence group of each non-empty set. A group the
// simulator cannot place by counting is marked interacting, so that it is
// placed pod by pod.
func (o *Orchestrator) groupsOf(sets [][]*apiv1.Pod) []*estimator.Group {
	out := make([]*estimator.Group, 0, len(sets))
	for _, set := range sets {
		if len(set) > 0 {
			out = append(out, &estimator.Group{Pods: set, Interacting: o.sim.PodByPodReason(set[0]) != ""})
		}
	}
	return out
}

// fitExisting places on the snapshot the pending pods that fit existing or
// upcoming nodes, and returns the others. Pods of a group that do not
// interact are placed in one pass over the nodes: a node that rejects one of
// them rejects its twins too, so it is not asked again for that group, and
// how many of them a node takes is counted with a few questions to the
// plugins (framework.PodCheck.PlaceOn), not asked pod by pod. Groups the
// simulator cannot vouch for that way (framework.Handle.PodByPodReason) go
// pod by pod, each to the first node that fits it.
func (o *Orchestrator) fitExisting(ctx context.Context, pending []*apiv1.Pod, realOnly bool) []*apiv1.Pod {
	return o.fitGroups(ctx, estimator.GroupPods(pending), realOnly)
}

// fitGroups is fitExisting for pods already in equivalence groups.
func (o *Orchestrator) fitGroups(ctx context.Context, groups []*estimator.Group, realOnly bool) []*apiv1.Pod {
	rest, _ := o.fitGroupsTold(ctx, groups, realOnly, nil, time.Time{})
	return rest
}

// fitExistingWithin is fitExisting that, past deadline (unless zero),
// checks no further equivalence group: their pods are returned as skipped.
// The groups the previous call skipped go first, in the order it skipped
// them, so that a backlog too large for one deadline is checked round-robin
// over several loops rather than the same first groups each time.
func (o *Orchestrator) fitExistingWithin(ctx context.Context, pending []*apiv1.Pod, deadline time.Time) (rest,
	skipped []*apiv1.Pod) {
	groups := estimator.GroupPods(pending)
	if len(o.skippedLast) > 0 {
		rank := func(g *estimator.Group) int {
			if r, ok := o.skippedLast[g.Representative().UID]; ok {
				return r
			}
			return len(groups) // after the skipped ones, in their order
		}
		slices.SortStableFunc(groups, func(a, b *estimator.Group) int { return rank(a) - rank(b) })
	}
	rest, skipped = o.fitGroupsTold(ctx, groups, false, nil, deadline)
	// Groups are skipped whole, from the first one reached past deadline
	// on: the last len(groups)-k groups for some k.
	o.skippedLast = make(map[types.UID]int, len(skipped))
	first := len(groups)
	for n := len(skipped); first > 0 && n > 0; {
		first--
		n -= len(groups[first].Pods)
	}
	for r, g := range groups[first:] {
		for _, p := range g.Pods {
			o.skippedLast[p.UID] = r
		}
	}
	return rest, skipped
}

// fitGroupsTold is fitGroups that tells placed, when not nil, how many
// pods it placed on each node, and skips the groups it reaches past
// deadline (unless zero).
func (o *Orchestrator) fitGroupsTold(ctx context.Context, groups []*estimator.Group, realOnly bool,
	placed func(node string, n int), deadline time.Time) (rest, skipped []*apiv1.Pod) {
	if placed == nil {
		placed = func(string, int) {}
	}
	logger := klog.FromContext(ctx)
	snap := o.sim.Snapshot()
	nodes := snap.NodeNames()
	var accept func(string) bool
	if realOnly {
		accept = func(n string) bool { return !strings.HasPrefix(n, upcomingPrefix) }
		real := nodes[:0:0]
		for _, n := range nodes {
			if !strings.HasPrefix(n, upcomingPrefix) {
				real = append(real, n)
			}
		}
		nodes = real
	}
	for _, g := range groups {
		if !deadline.IsZero() && o.clock.Now().After(deadline) {
			skipped = append(skipped, g.Pods...)
			continue
		}
		var shape *framework.PodShape
		if !g.Interacting && o.sim.PodByPodReason(g.Representative()) == "" {
			shape, _ = framework.NewPodShape(g.Representative()) // on error, pod by pod
		}
		if shape == nil {
			for _, p := range g.Pods {
				node, err := o.sim.FitAnywhere(ctx, p, accept)
				if err == nil {
					err = snap.AddPod(p, node)
				}
				if err != nil {
					rest = append(rest, p)
					continue
				}
				placed(node, 1)
			}
			continue
		}
		check := o.sim.Prepare(ctx, g.Representative())
		if err := check.Err(); err != nil {
			logger.V(4).Info("Pending pods fit no node", "pod", klog.KObj(g.Representative()), "count", len(g.Pods), "reason", err)
			rest = append(rest, g.Pods...)
			continue
		}
		req := framework.RequestOf(g.Representative())
		pods := g.Pods
		for _, node := range nodes {
			if !snap.HasRoom(node, req) {
				continue
			}
			// As many as the node takes, counted: the plugins are asked
			// a few times per node, not once per pod.
			n, err := check.PlaceOn(ctx, shape, pods, node, &req)
			if err != nil {
				continue
			}
			if n > 0 {
				placed(node, n)
			}
			if pods = pods[n:]; len(pods) == 0 {
				break
			}
		}
		if len(pods) > 0 {
			logger.V(4).Info("Pending pods fit no existing or upcoming node", "pod", klog.KObj(g.Representative()), "count", len(pods))
		}
		rest = append(rest, pods...)
	}
	return rest, skipped
}
