package framework

import (
	"context"
	"errors"
	"slices"

	apiv1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"
)

// PlaceOn places on node nodeName, in order, the first of pods that the node
// accepts one after another, and returns how many it placed. The result and
// the snapshot afterwards are those of the pod-by-pod loop
//
//	for each pod: stop unless (room == nil or HasRoom(node, *room)) and Fits(node); AddPodShaped(pod)
//
// but the Filter plugins are asked at most three times, whatever the count:
// about the node as it is, about the node holding all but the last pod
// counted, and about the node holding them all. The count is guessed from
// the node's free resources and pod slots and those two questions prove it;
// when they do not (a resource or plugin the guess does not model), the
// pods are placed one by one from where the proof failed.
//
// The pods must be equivalent to the prepared pod, shape must be theirs, and
// PodByPodReason must be empty for them: only then does the plugins' verdict
// on the node depend on nothing but how many of them it holds, and never turn
// from "no" back to "yes" as it holds more, which is what makes the two
// answers a proof. err is set only when the snapshot does not hold the node.
//
// The pods are placed as they are, not bound to the node (Spec.NodeName is
// not set on a copy, unlike AddPod): copying every pod would cost what their
// number costs, and no PreFilter or Filter plugin reads an existing pod's
// node from the pod rather than from its NodeInfo (TestPlacedPodsNeedNoBinding
// holds the plugins that look at existing pods to it). Snapshot.Pods returns
// them as placed.
func (c *PodCheck) PlaceOn(ctx context.Context, shape *PodShape, pods []*apiv1.Pod, nodeName string, room *Request) (int, error) {
	return c.placeOn(ctx, shape, pods, nodeName, room, guessFit)
}

// guesser guesses how many more pods of resources res ni takes.
type guesser func(ni *schedframework.NodeInfo, res fwk.PodResource, room *Request) int

// placeOn is PlaceOn with the guess given (tests give wrong ones).
func (c *PodCheck) placeOn(ctx context.Context, shape *PodShape, pods []*apiv1.Pod, nodeName string, room *Request,
	guess guesser) (int, error) {
	if len(pods) == 0 || c.err != nil || (c.allowed != nil && !c.allowed[nodeName]) {
		return 0, nil
	}
	if len(c.pod.Spec.ResourceClaims) > 0 {
		n, err := c.placeClaimed(ctx, shape, pods, nodeName, room)
		if errors.Is(err, ErrNodeNotFound) {
			return n, err
		}
		return n, nil
	}
	ctx = c.h.logs.wrap(ctx)
	snap := c.h.snapshot
	ni, err := snap.NodeInfo(nodeName)
	if err != nil {
		return 0, err
	}
	if !c.accepts(ctx, ni, room) {
		return 0, nil
	}
	if ni, err = snap.writable(nodeName, hasInterPodTerms(shape.info.Pod)); err != nil {
		return 0, err
	}
	n := min(max(guess(ni, shape.info.CalculateResource(), room), 1), len(pods))
	if slices.ContainsFunc(pods[:n-1], func(p *apiv1.Pod) bool { return p.UID == "" }) {
		// A pod without a UID could not be taken back (the NodeInfo finds
		// pods by UID) if the guess were too high: ask pod by pod.
		return c.placeOneByOne(ctx, ni, shape, pods, 0, room), nil
	}
	infos := shape.infosOf(pods[:n])
	ni.Pods = slices.Grow(ni.Pods, n)
	for i := range infos[:n-1] {
		ni.AddPodInfo(&infos[i])
	}
	if n > 1 && !c.accepts(ctx, ni, room) {
		// Guessed too many: take them back and count one by one.
		for i := range infos[:n-1] {
			if err := ni.RemovePod(snap.logger, pods[i]); err != nil {
				return 0, err
			}
		}
		return c.placeOneByOne(ctx, ni, shape, pods, 0, room), nil
	}
	ni.AddPodInfo(&infos[n-1])
	if n == len(pods) {
		return n, nil
	}
	// Guessed too few, if the node still accepts one more.
	return c.placeOneByOne(ctx, ni, shape, pods, n, room), nil
}

// infosOf returns the PodInfos of pods, allocated together, holding the
// pods themselves: see PlaceOn on why they are not bound to the node.
func (sh *PodShape) infosOf(pods []*apiv1.Pod) []schedframework.PodInfo {
	infos := make([]schedframework.PodInfo, len(pods))
	for i, p := range pods {
		infos[i] = *sh.info
		infos[i].Pod = p
	}
	return infos
}

// placeOneByOne goes on placing pods[from:] on ni (writable) while it accepts
// them, asking before each; it returns how many of pods ni then holds.
func (c *PodCheck) placeOneByOne(ctx context.Context, ni *schedframework.NodeInfo, shape *PodShape, pods []*apiv1.Pod,
	from int, room *Request) int {
	i := from
	for ; i < len(pods) && c.accepts(ctx, ni, room); i++ {
		info := *shape.info
		info.Pod = pods[i]
		ni.AddPodInfo(&info)
	}
	return i
}

// accepts reports whether ni, as it is, takes one more of the prepared pod.
func (c *PodCheck) accepts(ctx context.Context, ni *schedframework.NodeInfo, room *Request) bool {
	if room != nil && !hasRoom(ni, *room) {
		return false
	}
	return c.h.fw.RunFilterPlugins(ctx, c.state, c.pod, ni).IsSuccess()
}

// guessFit is how many more pods of resources res fit ni by its free
// resources (those NodeResourcesFit checks: cpu, memory, ephemeral storage
// and extended resources the pod requests, and pod slots) and, with room,
// by HasRoom's test. It is a guess: PlaceOn proves it with the plugins.
func guessFit(ni *schedframework.NodeInfo, res fwk.PodResource, room *Request) int {
	alloc, used := ni.GetAllocatable(), ni.GetRequested()
	n := int64(alloc.GetAllowedPodNumber() - len(ni.GetPods()))
	limit := func(free, req int64) {
		switch {
		case free < 0:
			n = 0
		case req > 0:
			n = min(n, free/req)
		}
	}
	limitRequested := func(free, req int64) {
		if req > 0 {
			limit(free, req)
		}
	}
	r := res.Resource
	limitRequested(alloc.GetMilliCPU()-used.GetMilliCPU(), r.GetMilliCPU())
	limitRequested(alloc.GetMemory()-used.GetMemory(), r.GetMemory())
	limitRequested(alloc.GetEphemeralStorage()-used.GetEphemeralStorage(), r.GetEphemeralStorage())
	for name, q := range r.GetScalarResources() {
		limitRequested(alloc.GetScalarResources()[name]-used.GetScalarResources()[name], q)
	}
	if room != nil {
		limitRequested(alloc.GetMilliCPU()-used.GetMilliCPU(), room.MilliCPU)
		limitRequested(alloc.GetMemory()-used.GetMemory(), room.Memory)
	}
	return int(max(n, 0))
}
