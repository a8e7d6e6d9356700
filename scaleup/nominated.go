package scaleup

import (
	"context"
	"slices"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// Pods nominated by the scheduler. When the scheduler finds no node for a
// pod but one where preempting lower-priority pods makes room, it deletes
// those pods (the victims) and sets the pod's status.nominatedNodeName to
// that node; the pod stays pending until the victims are gone, then runs
// there. The capacity is found: scaling up for the pod would add a node it
// does not need, and leave the room the victims free counted twice (for
// the nominated pod once it runs, and as free room for other pending pods
// now). So each session starts with such pods on their nominated node, as
// upstream's simulation does: the victims stay where they are until they
// are actually deleted (what the scheduler deletes may come back pending,
// through its controller, and is then counted as any pending pod), and the
// nominated pod is added next to them, so the node shows no free room
// until they go. A nominated pod is placed only when it passes the
// scheduler's Filter plugins on its node with the pods of strictly lower
// priority there set aside, as the scheduler's preemption checks it;
// otherwise (the node is gone, cordoned, tainted, or too full even
// without those pods) it is an ordinary pending pod. The scale-down sees
// the placed pod as a pod of that node (PodsOn): the node is not
// unneeded.

// placeNominated puts on the snapshot each pod of pending that the
// scheduler nominated to a node where it fits once the lower-priority pods
// are set aside, and returns them by UID with their node. Pods of higher
// priority go first: a pod the scheduler nominated later, to the same
// node, fits after them, not in their place (the scheduler, too, counts
// the nominated pods of equal or higher priority as there). Expendable
// pods (--expendable-pods-priority-cutoff) are not placed: they never
// block a scale-down.
func (o *Orchestrator) placeNominated(ctx context.Context, pending []*apiv1.Pod) map[types.UID]string {
	var nominated []*apiv1.Pod
	for _, p := range pending {
		if p.Status.NominatedNodeName != "" && p.Spec.NodeName == "" && p.DeletionTimestamp == nil &&
			podPriority(p) >= int32(o.opts.ExpendablePodsPriorityCutoff) {
			nominated = append(nominated, p)
		}
	}
	if len(nominated) == 0 {
		return nil
	}
	slices.SortStableFunc(nominated, func(a, b *apiv1.Pod) int { return int(podPriority(b)) - int(podPriority(a)) })
	logger := klog.FromContext(ctx)
	placed := make(map[types.UID]string, len(nominated))
	for _, p := range nominated {
		node := p.Status.NominatedNodeName
		if err := o.fitsNominated(ctx, p, node); err != nil {
			logger.V(4).Info("Pod nominated by the scheduler does not fit its node; counting it as pending",
				"pod", klog.KObj(p), "node", node, "reason", err)
			continue
		}
		if err := o.sim.Snapshot().AddPod(p, node); err != nil {
			logger.V(4).Info("Pod nominated by the scheduler cannot be placed on its node; counting it as pending",
				"pod", klog.KObj(p), "node", node, "reason", err)
			continue
		}
		placed[p.UID] = node
		logger.V(4).Info("Pod nominated by the scheduler counted on its node", "pod", klog.KObj(p), "node", node)
	}
	return placed
}

// fitsNominated checks pod on node as the scheduler's preemption does: the
// node's pods of lower priority than pod's set aside, the others (nominated
// pods placed before included) kept. The snapshot is left as it was.
func (o *Orchestrator) fitsNominated(ctx context.Context, pod *apiv1.Pod, node string) error {
	snap := o.sim.Snapshot()
	on, err := snap.Pods(node)
	if err != nil {
		return err // not in the snapshot: gone, or not started yet
	}
	snap.Fork()
	defer snap.Revert()
	prio := podPriority(pod)
	for _, v := range on {
		if podPriority(v) < prio {
			if err := snap.RemovePod(v, node); err != nil {
				return err
			}
		}
	}
	return o.sim.CheckPod(ctx, pod, node)
}

// podPriority is a pod's priority as the scheduler reads it: 0 when unset.
func podPriority(p *apiv1.Pod) int32 {
	if p.Spec.Priority == nil {
		return 0
	}
	return *p.Spec.Priority
}

// withoutNominated splits off the pods of pods this session placed on their
// nominated node.
func (s *Session) withoutNominated(pods []*apiv1.Pod) (rest, nominated []*apiv1.Pod) {
	if len(s.nominated) == 0 {
		return pods, nil
	}
	rest = pods[:0:0]
	for _, p := range pods {
		if _, ok := s.nominated[p.UID]; ok {
			nominated = append(nominated, p)
			continue
		}
		rest = append(rest, p)
	}
	return rest, nominated
}
