package clusterstate

import (
	"context"
	"fmt"
	"time"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The status ConfigMap's format: its data key, annotation and time layout,
// and the values of its status fields, as upstream writes them (clients
// and e2e suites parse them).
const (
	StatusDataKey         = "status"
	LastUpdatedAnnotation = "cluster-autoscaler.kubernetes.io/last-updated"
	StatusTimeLayout      = "2006-01-02 15:04:05.999999999 -0700 MST"

	AutoscalerInitializing = "Initializing"
	AutoscalerRunning      = "Running"

	HealthHealthy   = "Healthy"
	HealthUnhealthy = "Unhealthy"

	ScaleUpInProgress = "InProgress"
	ScaleUpNoActivity = "NoActivity"
	ScaleUpBackoff    = "Backoff"

	ScaleDownCandidatesPresent = "CandidatesPresent"
	ScaleDownNoCandidates      = "NoCandidates"

	// maxStatusMessage caps back-off messages, like upstream.
	maxStatusMessage = 500
)

// Status is the content of the status ConfigMap's data key. The types
// mirror upstream's, field for field and with the same JSON names and
// omitempty rules, so that the YAML (written through JSON, keys sorted) is
// byte for byte upstream's for the same state: struct fields are always
// written (zero counts included), zero times are written as null.
type Status struct {
	Time             string          `json:"time,omitempty"`
	AutoscalerStatus string          `json:"autoscalerStatus,omitempty"`
	Message          string          `json:"message,omitempty"`
	ClusterWide      ClusterStatus   `json:"clusterWide,omitempty"`
	NodeGroups       []NodeGroupStat `json:"nodeGroups,omitempty"`
}

// ClusterStatus is the cluster-wide part.
type ClusterStatus struct {
	Health    ClusterHealth   `json:"health,omitempty"`
	ScaleUp   ClusterScaleUp  `json:"scaleUp,omitempty"`
	ScaleDown ScaleDownStatus `json:"scaleDown,omitempty"`
}

// NodeGroupStat is one node group's part.
type NodeGroupStat struct {
	Name      string          `json:"name,omitempty"`
	Health    NodeGroupHealth `json:"health,omitempty"`
	ScaleUp   ScaleUpStatus   `json:"scaleUp,omitempty"`
	ScaleDown ScaleDownStatus `json:"scaleDown,omitempty"`
}

// ClusterHealth says whether the cluster is healthy.
type ClusterHealth struct {
	Status             string         `json:"status,omitempty"`
	NodeCounts         NodeCountsStat `json:"nodeCounts,omitempty"`
	LastProbeTime      metav1.Time    `json:"lastProbeTime,omitempty"`
	LastTransitionTime metav1.Time    `json:"lastTransitionTime,omitempty"`
}

// NodeGroupHealth says whether a node group is healthy, with its sizes.
type NodeGroupHealth struct {
	Status              string         `json:"status,omitempty"`
	NodeCounts          NodeCountsStat `json:"nodeCounts,omitempty"`
	CloudProviderTarget int            `json:"cloudProviderTarget"`
	MinSize             int            `json:"minSize"`
	MaxSize             int            `json:"maxSize"`
	LastProbeTime       metav1.Time    `json:"lastProbeTime,omitempty"`
	LastTransitionTime  metav1.Time    `json:"lastTransitionTime,omitempty"`
}

// NodeCountsStat are node counts in the status format.
type NodeCountsStat struct {
	Registered       RegisteredStat `json:"registered,omitempty"`
	LongUnregistered int            `json:"longUnregistered"`
	Unregistered     int            `json:"unregistered"`
}

// RegisteredStat are registered nodes by state.
type RegisteredStat struct {
	Total        int         `json:"total"`
	Ready        int         `json:"ready"`
	NotStarted   int         `json:"notStarted"`
	Suspended    int         `json:"suspended"`
	BeingDeleted int         `json:"beingDeleted,omitempty"`
	Unready      UnreadyStat `json:"unready,omitempty"`
}

// UnreadyStat counts unready nodes.
type UnreadyStat struct {
	Total           int `json:"total"`
	ResourceUnready int `json:"resourceUnready"`
}

// ClusterScaleUp is the cluster-wide scale-up state.
type ClusterScaleUp struct {
	Status             string      `json:"status,omitempty"`
	LastProbeTime      metav1.Time `json:"lastProbeTime,omitempty"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}

// ScaleUpStatus is a node group's scale-up state.
type ScaleUpStatus struct {
	Status             string      `json:"status,omitempty"`
	BackoffInfo        BackoffInfo `json:"backoffInfo,omitempty"`
	LastProbeTime      metav1.Time `json:"lastProbeTime,omitempty"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}

// BackoffInfo says why a group is backed off.
type BackoffInfo struct {
	ErrorCode    string `json:"errorCode,omitempty"`
	ErrorMessage string `json:"errorMessage,omitempty"`
}

// ScaleDownStatus is the scale-down state.
type ScaleDownStatus struct {
	Status             string      `json:"status,omitempty"`
	Candidates         int         `json:"candidates,omitempty"`
	LastProbeTime      metav1.Time `json:"lastProbeTime,omitempty"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}

// UnremovableNode is a node scale-down keeps, and why. The list goes to
// the ConfigMap's own key UnremovableDataKey, not into upstream's status.
type UnremovableNode struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
	// Detail says more of the reason when there is more to say: for
	// NoPlaceToMovePods, the pod that cannot move and why (its resource
	// claims that cannot be allocated on another node).
	Detail string `json:"detail,omitempty"`
}

// ScaleDownCandidates tells the status how many scale-down candidates
// the cluster and each group have; nil means none anywhere.
type ScaleDownCandidates func(group string) int

// Status builds the status of the last Update at now, as upstream builds
// it: the probe time of the cluster's parts is the Update's; a node group
// without any node (registered or not) has no probe time for its health and
// scale-up, like upstream's groups without readiness; a part's transition
// time is the probe time at which its status last changed. candidates may
// be nil.
func (r *Registry) Status(now time.Time, candidates ScaleDownCandidates) *Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	if candidates == nil {
		candidates = func(string) int { return 0 }
	}
	probe := metav1.NewTime(r.updated)
	// As upstream: scale-down's probe time is when it last planned.
	scaleDownProbe := metav1.NewTime(r.scaleDownProbed)
	st := &Status{Time: now.Format(StatusTimeLayout), AutoscalerStatus: AutoscalerRunning}
	health := HealthUnhealthy
	if r.healthy {
		health = HealthHealthy
	}
	scaleUp := ScaleUpNoActivity
	if len(r.scaleUps) > 0 {
		scaleUp = ScaleUpInProgress
	}
	st.ClusterWide = ClusterStatus{
		Health: ClusterHealth{Status: health, NodeCounts: countsStat(r.cluster), LastProbeTime: probe,
			LastTransitionTime: r.transition("cluster/health", health, probe)},
		ScaleUp: ClusterScaleUp{Status: scaleUp, LastProbeTime: probe,
			LastTransitionTime: r.transition("cluster/scaleUp", scaleUp, probe)},
		ScaleDown: r.scaleDownStat("cluster", candidates(""), scaleDownProbe),
	}

	for _, gs := range r.sortedGroups() {
		id := gs.NodeGroup.Id()
		groupProbe := probe
		if gs.Counts.Registered() == 0 && gs.Counts.Unregistered == 0 && gs.Counts.LongUnregistered == 0 {
			groupProbe = metav1.Time{}
		}
		health := HealthUnhealthy
		if gs.Healthy {
			health = HealthHealthy
		}
		up := ScaleUpStatus{Status: ScaleUpNoActivity, LastProbeTime: groupProbe}
		switch {
		case gs.ScaleUp != nil:
			up.Status = ScaleUpInProgress
		case !gs.Healthy:
			up.Status = HealthUnhealthy
		case gs.BackedOff:
			up.Status = ScaleUpBackoff
			up.BackoffInfo = BackoffInfo{ErrorCode: gs.BackoffReason.ErrorCode,
				ErrorMessage: truncate(gs.BackoffReason.ErrorMessage)}
		}
		up.LastTransitionTime = r.transition(id+"/scaleUp", up.Status, groupProbe)
		st.NodeGroups = append(st.NodeGroups, NodeGroupStat{
			Name: id,
			Health: NodeGroupHealth{Status: health, NodeCounts: countsStat(gs.Counts), CloudProviderTarget: gs.Target,
				MinSize: gs.NodeGroup.MinSize(), MaxSize: gs.NodeGroup.MaxSize(), LastProbeTime: groupProbe,
				LastTransitionTime: r.transition(id+"/health", health, groupProbe)},
			ScaleUp:   up,
			ScaleDown: r.scaleDownStat(id, candidates(id), scaleDownProbe),
		})
	}
	return st
}

func (r *Registry) scaleDownStat(key string, candidates int, probe metav1.Time) ScaleDownStatus {
	s := ScaleDownStatus{Status: ScaleDownNoCandidates, Candidates: candidates, LastProbeTime: probe}
	if candidates > 0 {
		s.Status = ScaleDownCandidatesPresent
	}
	s.LastTransitionTime = r.transition(key+"/scaleDown", s.Status, probe)
	return s
}

// transition returns since when key has had value, remembering changes:
// a changed value starts at probe. The caller holds r.mu.
func (r *Registry) transition(key, value string, probe metav1.Time) metav1.Time {
	t, ok := r.transitions[key]
	if !ok || t.value != value {
		t = transition{value: value, since: probe.Time}
		r.transitions[key] = t
	}
	return metav1.Time{Time: t.since}
}

func countsStat(c NodeCounts) NodeCountsStat {
	return NodeCountsStat{LongUnregistered: c.LongUnregistered, Unregistered: c.Unregistered,
		Registered: RegisteredStat{Total: c.Registered(), Ready: c.Ready, NotStarted: c.NotStarted,
			Suspended: c.Suspended, BeingDeleted: c.BeingDeleted, Unready: UnreadyStat{Total: c.Unready, ResourceUnready: c.ResourceUnready}}}
}

func truncate(msg string) string {
	if len(msg) <= maxStatusMessage {
		return msg
	}
	return msg[:maxStatusMessage] + "<truncated>"
}

// StatusWriter writes the status ConfigMap. Its methods are not safe for
// concurrent use (the loop writes, one loop at a time).
type StatusWriter struct {
	Client    kubernetes.Interface
	Namespace string
	Name      string
	// Sections, when set, gives more keys of this autoscaler's own to write
	// with every status (node healing's "healing"); an empty value removes
	// its key.
	Sections func() map[string]string
	// RefreshAfter bounds how old the written status may get while only its
	// probe times change (0: DefaultStatusRefresh; negative: write every
	// time, as upstream does). See Write.
	RefreshAfter time.Duration

	// last is what the last successful write left (see statuswrite.go).
	last lastWrite
}

// UnremovableDataKey is this autoscaler's own ConfigMap key (not
// upstream's) listing the nodes scale-down keeps, with their reasons.
const UnremovableDataKey = "unremovableNodes"

// Write writes st into the ConfigMap's status key (creating the ConfigMap
// when missing) and unremovable, when not empty, into UnremovableDataKey;
// the ConfigMap's other keys, labels and annotations are left as they are.
//
// A status that differs from the last one written only in its times
// (st.Time and the probe times; a transition time is a change) is not
// written while the last write is recent enough: younger than RefreshAfter
// even at the next loop, if the next loop comes as long after this one as
// this one after the previous call. Any other change is written at once.
// Upstream writes every loop; at its default scan interval (10 s) its
// status is up to 10 s old, which is what DefaultStatusRefresh keeps.
func (w *StatusWriter) Write(ctx context.Context, st *Status, unremovable ...UnremovableNode) error {
	var sections map[string]string
	if w.Sections != nil {
		sections = w.Sections()
	}
	at, timed := statusTime(st)
	if w.last.fresh(at, timed, st, unremovable, sections, w.refreshAfter()) {
		return nil
	}
	body, err := w.last.statuses.encode(st)
	if err != nil {
		return fmt.Errorf("encoding the status: %w", err)
	}
	extra, err := w.last.unremovableYAML(unremovable)
	if err != nil {
		return fmt.Errorf("encoding the unremovable nodes: %w", err)
	}
	fill := func(cm *apiv1.ConfigMap) {
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cm.Annotations[LastUpdatedAnnotation] = st.Time
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[StatusDataKey] = string(body)
		if extra != nil {
			cm.Data[UnremovableDataKey] = string(extra)
		} else {
			delete(cm.Data, UnremovableDataKey)
		}
		for k, v := range sections {
			if v == "" {
				delete(cm.Data, k)
			} else {
				cm.Data[k] = v
			}
		}
	}
	written, err := w.put(ctx, fill)
	w.last.wrote(written, at, timed, st, unremovable, sections)
	if err != nil {
		return fmt.Errorf("writing the status ConfigMap %s/%s: %w", w.Namespace, w.Name, err)
	}
	return nil
}

// WriteInitializing writes the start-up status.
func (w *StatusWriter) WriteInitializing(ctx context.Context, now time.Time) error {
	return w.Write(ctx, &Status{Time: now.Format(StatusTimeLayout), AutoscalerStatus: AutoscalerInitializing})
}

// Delete removes the ConfigMap (on a clean exit); a missing one is fine.
func (w *StatusWriter) Delete(ctx context.Context) error {
	w.last = lastWrite{}
	err := w.Client.CoreV1().ConfigMaps(w.Namespace).Delete(ctx, w.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the status ConfigMap: %w", err)
	}
	return nil
}

// Reference is the ConfigMap as an event target for cluster-level events.
func (w *StatusWriter) Reference() *apiv1.ObjectReference {
	return &apiv1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: w.Namespace, Name: w.Name}
}
