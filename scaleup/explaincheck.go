package scaleup

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"k8s.io/autoscaler/cluster-autoscaler/explain"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

// maxCheckedNodes bounds how many nodes the explainer asks, for a request
// whose pods do not fit, why a node refuses them.
const maxCheckedNodes = 1000

// noNodeGroup names the nodes of no node group in the verdicts.
const noNodeGroup = "(no node group)"

// everyNode stands for the node group of a refusal of the pod before any
// node is looked at (a claim that cannot be read).
const everyNode = "(every node)"

// recordCheck records, for the explainer, a check of pods (the pods of one
// ProvisioningRequest) against the nodes the cluster has (registered ones
// only when realOnly): where the pods are booked (placed: how many on each
// node; booked says the placements stand, as Place's do and FitAll's when
// all fit), and, when rest is left and realOnly, why each node refuses the
// first pod left, grouped by node group and reason. It runs before FitAll
// reverts the snapshot, so that the refusals see the nodes as the
// request's other pods left them.
//
// refused are the refusals of the first pod left (refusalsOf), when the
// caller has them; they are asked for here when it has not.
func (o *Orchestrator) recordCheck(ctx context.Context, pods, rest []*apiv1.Pod, placed map[string]int, realOnly, booked bool,
	refused []explain.NodeGroupVerdict) {
	if o.explain == nil || len(pods) == 0 {
		return
	}
	names, req := explain.PodNames(pods)
	if req == "" {
		return // stand-ins (a ReplicaSet's planned replicas): nobody asks about them
	}
	where := "current"
	if !realOnly {
		where = "current or upcoming"
	}
	rec := explain.PodGroup{Pods: names, PodCount: len(pods), Request: req, Outcome: explain.OutcomeBooked,
		Message: fmt.Sprintf("all %d pods fit the cluster's %s nodes", len(pods), where)}
	if booked {
		rec.NodeGroups = o.bookings(ctx, placed)
	}
	if len(rest) > 0 {
		rec.Outcome = explain.OutcomeNoFit
		rec.Message = fmt.Sprintf("%d of the %d pods fit no %s node (pod %s/%s and its like)", len(rest), len(pods),
			where, rest[0].Namespace, rest[0].Name)
		if booked && len(placed) > 0 {
			rec.Message += "; the others are booked"
		}
		if realOnly {
			refusals := refused
			if refusals == nil {
				refusals = o.refusalsOf(ctx, rest, realOnly)
			}
			if len(refusals) == 0 {
				rec.Message += "; no registered node refused it on its own (the cluster may have none)"
			}
			rec.NodeGroups = append(rec.NodeGroups, refusals...)
		}
	}
	o.explain.AddPodGroup(rec)
}

// bookings are, per node group, the nodes the pods were placed on (placed:
// how many on each node).
func (o *Orchestrator) bookings(ctx context.Context, placed map[string]int) []explain.NodeGroupVerdict {
	type booking struct {
		nodes []string
		pods  int
	}
	byGroup := map[string]*booking{}
	for _, node := range slices.Sorted(maps.Keys(placed)) {
		n := placed[node]
		g := o.groupOfNode(ctx, node)
		b := byGroup[g]
		if b == nil {
			b = &booking{}
			byGroup[g] = b
		}
		b.nodes = append(b.nodes, fmt.Sprintf("%s (%d)", node, n))
		b.pods += n
	}
	out := make([]explain.NodeGroupVerdict, 0, len(byGroup))
	for _, g := range slices.Sorted(maps.Keys(byGroup)) {
		b := byGroup[g]
		out = append(out, explain.NodeGroupVerdict{NodeGroup: g, Fits: true, Nodes: len(b.nodes), Pods: b.pods,
			Chosen: true, Why: "booked on " + nameList(b.nodes)})
	}
	return out
}

// refusalsOf are the nodes' refusals (nodeRefusals) of the first pod of
// rest, when pods are left and realOnly; none otherwise. The result is not
// nil when the nodes were asked.
func (o *Orchestrator) refusalsOf(ctx context.Context, rest []*apiv1.Pod, realOnly bool) []explain.NodeGroupVerdict {
	if len(rest) == 0 || !realOnly {
		return nil
	}
	if out := o.nodeRefusals(ctx, rest[0], realOnly); out != nil {
		return out
	}
	return []explain.NodeGroupVerdict{}
}

// maxRefusalText bounds the refusal a condition message carries.
const maxRefusalText = 300

// firstRefusal words, for a ProvisioningRequest's condition, why the
// first pod left fits no node: when every node refuses it for want of the
// same devices, "no node offers 8 devices of class gpu.example.com" (the
// words of the NotTriggerScaleUp event, for nodes that exist); otherwise
// the refusal of the first node group by name (then by reason), with its
// nodes, and how many other refusals there are. It is "" when no node refused the pod (the cluster
// may have none), and at most maxRefusalText long.
func firstRefusal(refused []explain.NodeGroupVerdict) string {
	if len(refused) == 0 {
		return ""
	}
	devices, same := strings.CutPrefix(refused[0].Reason, reasonNoDevices)
	for _, v := range refused[1:] {
		same = same && v.Reason == refused[0].Reason
	}
	if same {
		return bounded("no node offers " + devices)
	}
	// The node order of the snapshot is not stable: the refusal named is
	// chosen by name, so that the message is the same from one loop to the
	// next while nothing changes.
	sorted := slices.Clone(refused)
	slices.SortStableFunc(sorted, func(a, b explain.NodeGroupVerdict) int {
		if c := strings.Compare(a.NodeGroup, b.NodeGroup); c != 0 {
			return c
		}
		return strings.Compare(a.Reason, b.Reason)
	})
	v := sorted[0]
	text := fmt.Sprintf("node group %s: %s", v.NodeGroup, v.Reason)
	if v.NodeGroup == everyNode {
		text = v.Reason
	}
	if v.Detail != "" {
		text += " (" + v.Detail + ")"
	}
	switch more := len(sorted) - 1; {
	case more == 1:
		text += "; 1 more refusal"
	case more > 1:
		text += fmt.Sprintf("; %d more refusals", more)
	}
	return bounded(text)
}

// bounded cuts text to maxRefusalText bytes, on a rune boundary, marking
// the cut.
func bounded(text string) string {
	if len(text) <= maxRefusalText {
		return text
	}
	cut := maxRefusalText - len("...")
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return text[:cut] + "..."
}

// nodeRefusals asks each node (registered ones only when realOnly) why pod
// does not fit it, and groups the answers by node group and reason, with
// the nodes named and, for a lack of cpu or memory, the numbers.
func (o *Orchestrator) nodeRefusals(ctx context.Context, pod *apiv1.Pod, realOnly bool) []explain.NodeGroupVerdict {
	snap := o.sim.Snapshot()
	check := o.sim.Prepare(ctx, pod)
	if err := check.Err(); err != nil {
		v := explain.NodeGroupVerdict{NodeGroup: everyNode, Cause: explain.CauseOther,
			Reason: strings.Join(deviceReasons(snap.DeviceDemands, err, pod, nil), ", ")}
		var u *framework.Unschedulable
		if errors.As(err, &u) {
			v.Cause, v.Plugin = explain.CauseScheduler, u.Plugin
		}
		return []explain.NodeGroupVerdict{v}
	}
	type key struct{ group, reason, plugin string }
	type refusal struct {
		nodes         []string
		maxCPU, maxMB int64
	}
	found := map[key]*refusal{}
	var order []key
	checked, skipped := 0, 0
	for _, node := range snap.NodeNames() {
		if realOnly && strings.HasPrefix(node, upcomingPrefix) {
			continue
		}
		if checked >= maxCheckedNodes {
			skipped++
			continue
		}
		checked++
		err := check.Fits(ctx, node)
		if err == nil {
			continue
		}
		k := key{group: o.groupOfNode(ctx, node), reason: strings.Join(deviceReasons(snap.DeviceDemands, err, pod, nil), ", ")}
		var u *framework.Unschedulable
		if errors.As(err, &u) {
			k.plugin = u.Plugin
		}
		f := found[k]
		if f == nil {
			f = &refusal{maxCPU: -1, maxMB: -1}
			found[k] = f
			order = append(order, k)
		}
		f.nodes = append(f.nodes, node)
		if cpu, mem, _, err := snap.Free(node); err == nil {
			f.maxCPU, f.maxMB = max(f.maxCPU, cpu), max(f.maxMB, mem)
		}
	}
	want := framework.RequestOf(pod)
	out := make([]explain.NodeGroupVerdict, 0, len(order))
	for _, k := range order {
		f := found[k]
		v := explain.NodeGroupVerdict{NodeGroup: k.group, Cause: explain.CauseOther, Plugin: k.plugin, Reason: k.reason}
		if k.plugin != "" {
			v.Cause = explain.CauseScheduler
		}
		details := []string{fmt.Sprintf("%d node(s): %s", len(f.nodes), nameList(f.nodes))}
		if strings.Contains(k.reason, "Insufficient cpu") {
			details = append(details, fmt.Sprintf("the pod requests %s cpu, the most free on these nodes is %s",
				resource.NewMilliQuantity(want.MilliCPU, resource.DecimalSI), resource.NewMilliQuantity(f.maxCPU, resource.DecimalSI)))
		}
		if strings.Contains(k.reason, "Insufficient memory") {
			details = append(details, fmt.Sprintf("the pod requests %s memory, the most free on these nodes is %s",
				resource.NewQuantity(want.Memory, resource.BinarySI), resource.NewQuantity(f.maxMB, resource.BinarySI)))
		}
		v.Detail = strings.Join(details, "; ")
		out = append(out, v)
	}
	if skipped > 0 && len(out) > 0 {
		out[len(out)-1].Detail += fmt.Sprintf(" (only the first %d nodes were asked; %d more not)", maxCheckedNodes, skipped)
	}
	return out
}

// groupOfNode names the node group of a snapshot node (an upcoming node's
// from its name), or noNodeGroup.
func (o *Orchestrator) groupOfNode(ctx context.Context, name string) string {
	if group, ok := strings.CutPrefix(name, upcomingPrefix); ok {
		if i := strings.LastIndex(group, "-"); i > 0 {
			group = group[:i]
		}
		return group
	}
	ni, err := o.sim.Snapshot().NodeInfo(name)
	if err != nil || ni.Node() == nil {
		return noNodeGroup
	}
	ng, err := o.provider.NodeGroupForNode(ctx, ni.Node())
	if err != nil || ng == nil {
		return noNodeGroup
	}
	return ng.Id()
}

// nameList names up to five names in name order, and counts the others.
func nameList(names []string) string {
	names = slices.Sorted(slices.Values(names)) // the snapshot's node order is not the names'
	if len(names) <= 5 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:5], ", "), len(names)-5)
}
