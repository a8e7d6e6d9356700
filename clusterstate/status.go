package clusterstate

import (
	"context"
	"fmt"
	"time"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
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

// Status is the content of the status ConfigMap's data key.
type Status struct {
	Time             string          `json:"time"`
	AutoscalerStatus string          `json:"autoscalerStatus"`
	Message          string          `json:"message,omitempty"`
	ClusterWide      *ClusterStatus  `json:"clusterWide,omitempty"`
	NodeGroups       []NodeGroupStat `json:"nodeGroups,omitempty"`
}

// ClusterStatus is the cluster-wide part.
type ClusterStatus struct {
	Health    HealthStatus    `json:"health"`
	ScaleUp   ScaleUpStatus   `json:"scaleUp"`
	ScaleDown ScaleDownStatus `json:"scaleDown"`
}

// NodeGroupStat is one node group's part.
type NodeGroupStat struct {
	Name      string          `json:"name"`
	Health    HealthStatus    `json:"health"`
	ScaleUp   ScaleUpStatus   `json:"scaleUp"`
	ScaleDown ScaleDownStatus `json:"scaleDown"`
}

// HealthStatus says whether a group or the cluster is healthy.
type HealthStatus struct {
	Status              string         `json:"status"`
	NodeCounts          NodeCountsStat `json:"nodeCounts"`
	CloudProviderTarget *int           `json:"cloudProviderTarget,omitempty"`
	MinSize             *int           `json:"minSize,omitempty"`
	MaxSize             *int           `json:"maxSize,omitempty"`
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
	Total        int          `json:"total"`
	Ready        int          `json:"ready"`
	NotStarted   int          `json:"notStarted"`
	BeingDeleted int          `json:"beingDeleted,omitempty"`
	Unready      *UnreadyStat `json:"unready,omitempty"`
}

// UnreadyStat counts unready nodes.
type UnreadyStat struct {
	Total           int `json:"total"`
	ResourceUnready int `json:"resourceUnready"`
}

// ScaleUpStatus is the scale-up state.
type ScaleUpStatus struct {
	Status             string       `json:"status"`
	BackoffInfo        *BackoffInfo `json:"backoffInfo,omitempty"`
	LastProbeTime      metav1.Time  `json:"lastProbeTime,omitempty"`
	LastTransitionTime metav1.Time  `json:"lastTransitionTime,omitempty"`
}

// BackoffInfo says why a group is backed off.
type BackoffInfo struct {
	ErrorCode    string `json:"errorCode"`
	ErrorMessage string `json:"errorMessage"`
}

// ScaleDownStatus is the scale-down state.
type ScaleDownStatus struct {
	Status     string `json:"status"`
	Candidates int    `json:"candidates,omitempty"`
	// UnremovableNodes says why nodes cannot be removed (cluster-wide part
	// only, at most 100 nodes; not in upstream's format).
	UnremovableNodes   []UnremovableNode `json:"unremovableNodes,omitempty"`
	LastProbeTime      metav1.Time       `json:"lastProbeTime,omitempty"`
	LastTransitionTime metav1.Time       `json:"lastTransitionTime,omitempty"`
}

// UnremovableNode is a node scale-down keeps, and why.
type UnremovableNode struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// ScaleDownCandidates tells the status how many scale-down candidates
// the cluster and each group have; nil means none anywhere.
type ScaleDownCandidates func(group string) int

// Status builds the status of the last Update at now. candidates may be nil.
func (r *Registry) Status(now time.Time, candidates ScaleDownCandidates) *Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	if candidates == nil {
		candidates = func(string) int { return 0 }
	}
	probe := metav1.NewTime(r.updated)
	st := &Status{Time: now.Format(StatusTimeLayout), AutoscalerStatus: AutoscalerRunning}
	health := HealthUnhealthy
	if r.healthy {
		health = HealthHealthy
	}
	scaleUp := ScaleUpNoActivity
	if len(r.scaleUps) > 0 {
		scaleUp = ScaleUpInProgress
	}
	cluster := &ClusterStatus{
		Health: HealthStatus{Status: health, NodeCounts: countsStat(r.cluster), LastProbeTime: probe,
			LastTransitionTime: r.transition("cluster/health", health, now)},
		ScaleUp: ScaleUpStatus{Status: scaleUp, LastProbeTime: probe,
			LastTransitionTime: r.transition("cluster/scaleUp", scaleUp, now)},
	}
	total := candidates("")
	cluster.ScaleDown = r.scaleDownStat("cluster", total, probe, now)
	st.ClusterWide = cluster

	for _, gs := range r.sortedGroups() {
		id := gs.NodeGroup.Id()
		target, minSize, maxSize := gs.Target, gs.NodeGroup.MinSize(), gs.NodeGroup.MaxSize()
		health := HealthUnhealthy
		if gs.Healthy {
			health = HealthHealthy
		}
		up := ScaleUpStatus{Status: ScaleUpNoActivity, LastProbeTime: probe}
		switch {
		case gs.BackedOff:
			up.Status = ScaleUpBackoff
			up.BackoffInfo = &BackoffInfo{ErrorCode: gs.BackoffReason.ErrorCode,
				ErrorMessage: truncate(gs.BackoffReason.ErrorMessage)}
		case gs.ScaleUp != nil:
			up.Status = ScaleUpInProgress
		}
		up.LastTransitionTime = r.transition(id+"/scaleUp", up.Status, now)
		st.NodeGroups = append(st.NodeGroups, NodeGroupStat{
			Name: id,
			Health: HealthStatus{Status: health, NodeCounts: countsStat(gs.Counts), CloudProviderTarget: &target,
				MinSize: &minSize, MaxSize: &maxSize, LastProbeTime: probe,
				LastTransitionTime: r.transition(id+"/health", health, now)},
			ScaleUp:   up,
			ScaleDown: r.scaleDownStat(id, candidates(id), probe, now),
		})
	}
	return st
}

func (r *Registry) scaleDownStat(key string, candidates int, probe metav1.Time, now time.Time) ScaleDownStatus {
	s := ScaleDownStatus{Status: ScaleDownNoCandidates, Candidates: candidates, LastProbeTime: probe}
	if candidates > 0 {
		s.Status = ScaleDownCandidatesPresent
	}
	s.LastTransitionTime = r.transition(key+"/scaleDown", s.Status, now)
	return s
}

// transition returns since when key has had value, remembering changes.
// The caller holds r.mu.
func (r *Registry) transition(key, value string, now time.Time) metav1.Time {
	t, ok := r.transitions[key]
	if !ok || t.value != value {
		t = transition{value: value, since: now}
		r.transitions[key] = t
	}
	return metav1.NewTime(t.since)
}

func countsStat(c NodeCounts) NodeCountsStat {
	s := NodeCountsStat{LongUnregistered: c.LongUnregistered, Unregistered: c.Unregistered,
		Registered: RegisteredStat{Total: c.Registered(), Ready: c.Ready, NotStarted: c.NotStarted,
			BeingDeleted: c.BeingDeleted}}
	if c.Unready > 0 {
		s.Registered.Unready = &UnreadyStat{Total: c.Unready}
	}
	return s
}

func truncate(msg string) string {
	if len(msg) <= maxStatusMessage {
		return msg
	}
	return msg[:maxStatusMessage] + "<truncated>"
}

// StatusWriter writes the status ConfigMap.
type StatusWriter struct {
	Client    kubernetes.Interface
	Namespace string
	Name      string
}

// Write creates or replaces the ConfigMap with st.
func (w *StatusWriter) Write(ctx context.Context, st *Status) error {
	body, err := yaml.Marshal(st)
	if err != nil {
		return fmt.Errorf("encoding the status: %w", err)
	}
	cms := w.Client.CoreV1().ConfigMaps(w.Namespace)
	cm, err := cms.Get(ctx, w.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cm = &apiv1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: w.Name}}
	case err != nil:
		return fmt.Errorf("reading the status ConfigMap: %w", err)
	}
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[LastUpdatedAnnotation] = st.Time
	cm.Data = map[string]string{StatusDataKey: string(body)}
	if cm.ResourceVersion == "" {
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
	} else {
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
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
