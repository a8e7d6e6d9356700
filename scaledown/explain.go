package scaledown

import (
	"fmt"

	"k8s.io/autoscaler/cluster-autoscaler/explain"
)

// ReasonScaleDownDisabled is the explainer's reason for every node when
// --scale-down-enabled=false.
const ReasonScaleDownDisabled = "ScaleDownDisabled"

// recordDisabled records, for the explainer, that no node is considered.
func (s *ScaleDown) recordDisabled(in Input) {
	if s.explain == nil {
		return
	}
	out := make([]explain.NodeVerdict, 0, len(in.Nodes))
	for _, n := range in.Nodes {
		out = append(out, explain.NodeVerdict{Node: n.Name, Reason: ReasonScaleDownDisabled, Detail: "--scale-down-enabled=false"})
	}
	s.explain.SetNodes(out, "disabled (--scale-down-enabled=false)")
}

// record gives the explainer every node's verdict of plan: unneeded since
// when and for how much longer, or the reason it is kept, with its detail
// and utilisation. cooldown names the delay that holds every removal.
func (s *ScaleDown) record(plan *Plan, in Input, cooldown string) {
	if s.explain == nil {
		return
	}
	groupOf := map[string]string{}
	for _, gs := range in.State.Groups() {
		for _, n := range gs.Nodes {
			groupOf[n.Name] = gs.NodeGroup.Id()
		}
	}
	removable := map[string]bool{}
	for _, c := range plan.Removable {
		removable[c.Node.Name] = true
	}
	out := make([]explain.NodeVerdict, 0, len(in.Nodes))
	seen := map[string]bool{}
	for _, c := range plan.Unneeded {
		name := c.Node.Name
		seen[name] = true
		v := s.verdict(plan, name, groupOf[name])
		since := c.Since
		v.Unneeded, v.Since, v.Removable = true, &since, removable[name]
		if gs := in.State.Group(c.Group.Id()); gs != nil {
			wait := gs.Options.ScaleDownUnneededTime
			if c.Unready {
				wait = gs.Options.ScaleDownUnreadyTime
			}
			left := max(0, wait-in.Now.Sub(since))
			v.TimeLeft = &left
		}
		if gs := in.State.Group(c.Group.Id()); gs != nil && v.Reason == ReasonNodeGroupMinSizeReached {
			v.Detail = fmt.Sprintf("node group %s: target size %d, min size %d", gs.NodeGroup.Id(), gs.Target, gs.NodeGroup.MinSize())
		}
		if v.Removable && cooldown != "" {
			v.Reason, v.Detail = "ScaleDownInCooldown", fmt.Sprintf("%s: nodes were added, deleted or failed to be deleted recently", cooldown)
		}
		out = append(out, v)
	}
	for _, n := range in.Nodes {
		if !seen[n.Name] {
			out = append(out, s.verdict(plan, n.Name, groupOf[n.Name]))
		}
	}
	note := ""
	if cooldown != "" {
		note = "in cooldown (" + cooldown + ")"
	}
	s.explain.SetNodes(out, note)
}

// verdict is one node's reason, detail and utilisation in plan.
func (s *ScaleDown) verdict(plan *Plan, name, group string) explain.NodeVerdict {
	v := explain.NodeVerdict{Node: name, NodeGroup: group, Reason: plan.Unremovable[name], Detail: plan.Details[name]}
	if u, ok := plan.Utilization[name]; ok {
		v.Utilization, v.Threshold = &u[0], &u[1]
		if v.Reason == ReasonNotUnderutilized && v.Detail == "" {
			v.Detail = fmt.Sprintf("utilization %.2f >= threshold %.2f", u[0], u[1])
		}
	}
	return v
}
