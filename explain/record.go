package explain

import (
	"fmt"
	"sort"
	"sync"
	"time"

	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/podutil"
)

// Bounds of one loop's record.
const (
	// MaxPodGroups is how many pod groups one loop's record holds; the
	// others are counted in Loop.DroppedPodGroups.
	MaxPodGroups = 2000
	// MaxNodeGroupVerdicts is how many node-group verdicts one pod group
	// keeps: those that fit first, then refusals; the others are counted in
	// PodGroup.MoreNodeGroups.
	MaxNodeGroupVerdicts = 100
	// MaxPodNames is how many pod names one pod group keeps (a lookup of a
	// pod past it finds nothing; PodGroup.PodCount counts them all).
	MaxPodNames = 5000
)

// Causes of a node group's refusal.
const (
	CauseScheduler     = "scheduler"       // a scheduler plugin rejected the template node
	CauseMaxSize       = "max-size"        // the group is at its max size
	CauseMaxNodesTotal = "max-nodes-total" // --max-nodes-total leaves no room
	CauseResourceLimit = "resource-limit"  // --cores-total, --memory-total, --gpu-total or a CapacityQuota
	CauseBackoff       = "backoff"         // the group is backed off after a failed scale-up
	CauseUnhealthy     = "unhealthy"       // the group has too many unready nodes
	CauseNoTemplate    = "no-template"     // no template node to simulate with
	CauseExcluded      = "excluded"        // a processor left the group out of this loop
	CauseOther         = "other"
)

// Outcomes of a pod group.
const (
	OutcomeScaledUp     = "scaled up"
	OutcomeFitsExisting = "fits an existing or upcoming node"
	OutcomeNoScaleUp    = "no scale-up"
	OutcomeProvReq      = "ProvisioningRequest"
)

// NodeGroupVerdict is one node group's answer to one pod group.
type NodeGroupVerdict struct {
	NodeGroup string `json:"nodeGroup"`
	// Fits: the group's template node takes (some of) the pods; Nodes is
	// how many new nodes that takes, Pods how many of the group's pods.
	Fits  bool `json:"fits"`
	Nodes int  `json:"nodes,omitempty"`
	Pods  int  `json:"pods,omitempty"`
	// Chosen: the expander picked this group; Why says how.
	Chosen bool   `json:"chosen,omitempty"`
	Why    string `json:"why,omitempty"`
	// Cause, Plugin and Reason are the first refusal: its kind (Cause*),
	// the scheduler plugin that refused (CauseScheduler), and its words,
	// as the NotTriggerScaleUp event says them.
	Cause  string `json:"cause,omitempty"`
	Plugin string `json:"plugin,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Detail gives the numbers (target and max size, the cluster's node
	// count against --max-nodes-total, the back-off's error message).
	Detail string `json:"detail,omitempty"`
	// Until is when the group's back-off ends.
	Until *time.Time `json:"until,omitempty"`
}

// PodGroup is one pending pod equivalence group and its verdicts.
type PodGroup struct {
	// Pods are the group's pods, "namespace/name"; PodCount counts them
	// all, beyond MaxPodNames.
	Pods     []string `json:"pods"`
	PodCount int      `json:"podCount"`
	// Request is the ProvisioningRequest ("namespace/name") the pods are
	// for, if any.
	Request string `json:"provisioningRequest,omitempty"`
	// Outcome is what the loop did for the group (Outcome*); Message says
	// it in words (the NotTriggerScaleUp message for pods left).
	Outcome string `json:"outcome"`
	// WaitsFor is the node group whose upcoming node the pods fit (a
	// scale-up in flight); DecidedAt, when the pods' last scale-up
	// decision, whose verdicts NodeGroups then are, was made.
	WaitsFor       string             `json:"waitsForNodeGroup,omitempty"`
	DecidedAt      *time.Time         `json:"decidedAt,omitempty"`
	Message        string             `json:"message,omitempty"`
	NodeGroups     []NodeGroupVerdict `json:"nodeGroups,omitempty"`
	MoreNodeGroups int                `json:"moreNodeGroups,omitempty"`
}

// NodeVerdict is one node's scale-down verdict.
type NodeVerdict struct {
	Node      string `json:"node"`
	NodeGroup string `json:"nodeGroup,omitempty"`
	// Unneeded: the node could go; Since is when it became unneeded and
	// TimeLeft how long until its unneeded time has passed (0 when it has).
	Unneeded bool           `json:"unneeded"`
	Since    *time.Time     `json:"unneededSince,omitempty"`
	TimeLeft *time.Duration `json:"timeLeft,omitempty"`
	// Removable: the node is to be removed in this loop (unless Reason
	// names a cooldown).
	Removable bool `json:"removable,omitempty"`
	// Reason is what keeps the node (the status ConfigMap's reasons:
	// BlockedByPod, NotUnderutilized, NodeGroupMinSizeReached, ...) and
	// Detail its specifics (the pod and the drain rule or PDB, the
	// utilisation against the threshold).
	Reason string `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Utilization and Threshold, when the planner computed them.
	Utilization *float64 `json:"utilization,omitempty"`
	Threshold   *float64 `json:"threshold,omitempty"`
	// NoScaleDownVerdict: scale-down said nothing of the node in the loop
	// (it did not run, or the node is not autoscaled); only its disruption
	// verdicts are known.
	NoScaleDownVerdict bool `json:"noScaleDownVerdict,omitempty"`
	// Disruptions are the node's verdicts for the disruption reasons that
	// are on (consolidation, drift, expiry, ...), by reason.
	Disruptions []DisruptionVerdict `json:"disruptions,omitempty"`
}

// Loop is the record of one loop.
type Loop struct {
	At               time.Time     `json:"at"`
	PodGroups        []PodGroup    `json:"podGroups"`
	DroppedPodGroups int           `json:"droppedPodGroups,omitempty"`
	Nodes            []NodeVerdict `json:"nodes"`
	// ScaleDown says why scale-down did not act at all in the loop
	// (disabled, cooldown), if so.
	ScaleDown string `json:"scaleDown,omitempty"`
	// Requests are the conditions the loop set on ProvisioningRequests.
	Requests []RequestConditions `json:"provisioningRequests,omitempty"`
	// disruptions are the disruption verdicts recorded in the loop, given
	// to Nodes when it ends.
	disruptions []DisruptionVerdict
}

// Recorder keeps the loop being recorded and the last complete one. A nil
// *Recorder records nothing, so that hooks need not check. Safe for use by
// the loop and the HTTP handlers at once.
type Recorder struct {
	mu   sync.Mutex
	cur  *Loop
	last *indexed
}

type indexed struct {
	loop   *Loop
	byPod  map[string]int
	byNode map[string]int
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder { return &Recorder{} }

// BeginLoop starts the record of the loop observed at now.
func (r *Recorder) BeginLoop(now time.Time) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cur = &Loop{At: now}
}

// EndLoop makes the loop being recorded the last one.
func (r *Recorder) EndLoop() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur == nil {
		return
	}
	l := r.cur
	r.cur = nil
	mergeDisruptions(l)
	ix := &indexed{loop: l, byPod: map[string]int{}, byNode: make(map[string]int, len(l.Nodes))}
	// A pod recorded twice in one loop (a group estimated again after a
	// first increase) is explained by its last record.
	for i, g := range l.PodGroups {
		for _, p := range g.Pods {
			ix.byPod[p] = i
		}
		carryDecision(&l.PodGroups[i], r.last)
	}
	sort.Slice(l.Nodes, func(i, j int) bool { return l.Nodes[i].Node < l.Nodes[j].Node })
	for i, n := range l.Nodes {
		ix.byNode[n.Node] = i
	}
	r.last = ix
}

// carryDecision gives a pod group that waits for an upcoming node the
// verdicts of the scale-up that was decided for it, from the previous
// loop's record: the decision is kept as long as its pods wait, and only
// for them.
func carryDecision(g *PodGroup, prev *indexed) {
	if g.WaitsFor == "" || len(g.NodeGroups) > 0 || len(g.Pods) == 0 || prev == nil {
		return
	}
	i, ok := prev.byPod[g.Pods[0]]
	if !ok {
		return
	}
	p := prev.loop.PodGroups[i]
	switch {
	case p.Outcome == OutcomeScaledUp:
		at := prev.loop.At
		g.NodeGroups, g.MoreNodeGroups, g.DecidedAt = p.NodeGroups, p.MoreNodeGroups, &at
	case p.DecidedAt != nil && p.WaitsFor == g.WaitsFor:
		g.NodeGroups, g.MoreNodeGroups, g.DecidedAt = p.NodeGroups, p.MoreNodeGroups, p.DecidedAt
	}
}

// AddPodGroup records a pod group's verdicts in the loop being recorded.
func (r *Recorder) AddPodGroup(g PodGroup) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur == nil {
		return
	}
	if len(r.cur.PodGroups) >= MaxPodGroups {
		r.cur.DroppedPodGroups++
		return
	}
	r.cur.PodGroups = append(r.cur.PodGroups, bound(g))
}

// SetNodes records the scale-down verdicts of the loop being recorded;
// note, when not empty, says why scale-down did not act at all.
func (r *Recorder) SetNodes(nodes []NodeVerdict, note string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur == nil {
		return
	}
	r.cur.Nodes, r.cur.ScaleDown = nodes, note
}

// bound caps g's verdicts and pod names, fitting verdicts first.
func bound(g PodGroup) PodGroup {
	if g.PodCount < len(g.Pods) {
		g.PodCount = len(g.Pods)
	}
	if len(g.Pods) > MaxPodNames {
		g.Pods = g.Pods[:MaxPodNames]
	}
	sort.SliceStable(g.NodeGroups, func(i, j int) bool {
		a, b := g.NodeGroups[i], g.NodeGroups[j]
		if a.Chosen != b.Chosen {
			return a.Chosen
		}
		if a.Fits != b.Fits {
			return a.Fits
		}
		return a.NodeGroup < b.NodeGroup
	})
	if len(g.NodeGroups) > MaxNodeGroupVerdicts {
		g.MoreNodeGroups += len(g.NodeGroups) - MaxNodeGroupVerdicts
		g.NodeGroups = g.NodeGroups[:MaxNodeGroupVerdicts]
	}
	return g
}

// At is the observation time of the last complete loop (zero when none).
func (r *Recorder) At() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		return time.Time{}
	}
	return r.last.loop.At
}

// Pod returns the last loop's record of the pod group holding pod
// ("namespace/name").
func (r *Recorder) Pod(pod string) (PodGroup, time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		return PodGroup{}, time.Time{}, false
	}
	i, ok := r.last.byPod[pod]
	if !ok {
		return PodGroup{}, r.last.loop.At, false
	}
	return r.last.loop.PodGroups[i], r.last.loop.At, true
}

// Request returns the last loop's records of the pod groups of a
// ProvisioningRequest ("namespace/name").
func (r *Recorder) Request(req string) ([]PodGroup, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		return nil, time.Time{}
	}
	var out []PodGroup
	for _, g := range r.last.loop.PodGroups {
		if g.Request == req {
			out = append(out, g)
		}
	}
	return out, r.last.loop.At
}

// Node returns the last loop's scale-down verdict on node, and the loop's
// scale-down note.
func (r *Recorder) Node(node string) (NodeVerdict, string, time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		return NodeVerdict{}, "", time.Time{}, false
	}
	i, ok := r.last.byNode[node]
	if !ok {
		return NodeVerdict{}, r.last.loop.ScaleDown, r.last.loop.At, false
	}
	return r.last.loop.Nodes[i], r.last.loop.ScaleDown, r.last.loop.At, true
}

// PodNames names pods "namespace/name" and tells the ProvisioningRequest
// the first one is for ("" when none).
func PodNames(pods []*apiv1.Pod) (names []string, request string) {
	names = make([]string, 0, min(len(pods), MaxPodNames))
	for i, p := range pods {
		if i < MaxPodNames {
			names = append(names, p.Namespace+"/"+p.Name)
		}
	}
	if len(pods) > 0 {
		p := pods[0]
		if name, ok := podutil.ConsumedRequestName(p); ok {
			request = p.Namespace + "/" + name
		}
	}
	return names, request
}

// Outcomes of pods the loop left before its scale-up.
const (
	// OutcomeSetAside: the pod-list processors took the pods out.
	OutcomeSetAside = "set aside before scale-up"
	// OutcomeExpendable: the pods are below --expendable-pods-priority-cutoff.
	OutcomeExpendable = "expendable"
	// OutcomeLoopStopped: the loop stopped before its scale-up (an
	// unhealthy cluster, no ready node, a cleanup or repair that changed
	// the cluster).
	OutcomeLoopStopped = "no scale-up this loop"
	// OutcomeNominated: the scheduler nominated the pods to a node
	// (status.nominatedNodeName, preemption) and they fit there once its
	// lower-priority pods are gone: the loop counted them on that node.
	OutcomeNominated = "nominated by the scheduler"
)

// SetAside records pending pods the loop left out of its scale-up (the
// pod-list processors took them out): those that consume a
// ProvisioningRequest are told so, one record per request; the others,
// one record per owner.
func (r *Recorder) SetAside(pods []*apiv1.Pod) {
	r.addByOwner(pods, OutcomeSetAside, func(_ *apiv1.Pod, req string) string {
		if req != "" {
			return fmt.Sprintf("consumes ProvisioningRequest %s: the capacity booked for the request is theirs, "+
				"they do not trigger a scale-up of their own", req)
		}
		return "not yet marked unschedulable by the scheduler, too new (--new-pod-scale-up-delay), in an ignored " +
			"namespace, or left out by another pod-list processor"
	})
}

// Expendable records pending pods the scale-up left out for their priority
// below cutoff (--expendable-pods-priority-cutoff), one record per owner
// and priority.
func (r *Recorder) Expendable(pods []*apiv1.Pod, cutoff int) {
	r.addByOwner(pods, OutcomeExpendable, func(p *apiv1.Pod, _ string) string {
		var prio int32
		if p.Spec.Priority != nil {
			prio = *p.Spec.Priority
		}
		return fmt.Sprintf("priority %d below the cutoff %d (--expendable-pods-priority-cutoff); "+
			"such pods never trigger a scale-up", prio, cutoff)
	})
}

// Nominated records pending pods the loop counted on the node the
// scheduler nominated them to (status.nominatedNodeName) instead of
// scaling up for them, one record per owner and node.
func (r *Recorder) Nominated(pods []*apiv1.Pod) {
	r.addByOwner(pods, OutcomeNominated, func(p *apiv1.Pod, _ string) string {
		return fmt.Sprintf("nominated to node %s by the scheduler: counted there, where it fits once the "+
			"lower-priority pods the scheduler preempts are gone; no scale-up for it", p.Status.NominatedNodeName)
	})
}

// LoopStopped records the pending pods of a loop that stopped before its
// scale-up, with why (the cluster is unhealthy, with its counts, ...).
func (r *Recorder) LoopStopped(pods []*apiv1.Pod, why string) {
	r.addByOwner(pods, OutcomeLoopStopped, func(*apiv1.Pod, string) string { return why })
}

// addByOwner records pods with outcome, one record per ProvisioningRequest
// they consume or else per owner, and per message.
func (r *Recorder) addByOwner(pods []*apiv1.Pod, outcome string, message func(p *apiv1.Pod, request string) string) {
	if r == nil || len(pods) == 0 {
		return
	}
	type key struct{ request, owner, message string }
	var order []key
	groups := map[key][]*apiv1.Pod{}
	for _, p := range pods {
		_, req := PodNames([]*apiv1.Pod{p})
		k := key{request: req, message: message(p, req)}
		if req == "" {
			k.owner = p.Namespace + "/" + p.Name
			for _, o := range p.OwnerReferences {
				if o.Controller != nil && *o.Controller {
					k.owner = string(o.UID)
				}
			}
		}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], p)
	}
	for _, k := range order {
		names, req := PodNames(groups[k])
		r.AddPodGroup(PodGroup{Pods: names, PodCount: len(groups[k]), Request: req, Outcome: outcome, Message: k.message})
	}
}
