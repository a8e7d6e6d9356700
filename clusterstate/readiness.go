package clusterstate

import (
	"strings"
	"time"

	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/taints"
)

// Readiness is the state of one registered node.
type Readiness int

// Node states, as counted in nodes_count and the status ConfigMap.
const (
	Ready Readiness = iota
	Unready
	NotStarted
)

// conditionStartupTaints keep pods off a node whose Ready condition may
// already be true: until the node lifecycle controller or the cloud
// controller lifts them, the node cannot take pods and has not really started.
var conditionStartupTaints = []string{
	"node.kubernetes.io/not-ready",
	"node.kubernetes.io/unreachable",
	"node.cloudprovider.kubernetes.io/uninitialized",
}

// Taints says which taint keys keep a node counted as starting (startup
// taints: the built-in prefixes startup-taint.cluster-autoscaler.kubernetes.io/
// and ignore-taint.cluster-autoscaler.kubernetes.io/, --startup-taint,
// --ignore-taint, --startup-taint-prefix and the controllers' not-ready,
// unreachable and uninitialized taints) and which only report a status
// (status-taint.cluster-autoscaler.kubernetes.io/ and --status-taint): a
// status taint never makes a node unready, even when its key is one of the
// controllers' taints.
type Taints struct {
	startup         map[string]bool
	startupPrefixes []string
	status          map[string]bool
}

// DefaultTaints are the built-in startup and status taints, without flags.
func DefaultTaints() Taints { return NewTaints(TaintOptions{}) }

// NewTaints reads the taint flags of opts.
func NewTaints(opts TaintOptions) Taints {
	t := Taints{startup: map[string]bool{}, status: map[string]bool{},
		startupPrefixes: []string{taints.StartupPrefix, taints.IgnorePrefix}}
	for _, k := range conditionStartupTaints {
		t.startup[k] = true
	}
	for _, k := range append(append([]string(nil), opts.StartupTaints...), opts.IgnoreTaints...) {
		t.startup[k] = true
	}
	t.startupPrefixes = append(t.startupPrefixes, opts.StartupTaintPrefixes...)
	for _, k := range opts.StatusTaints {
		t.status[k] = true
	}
	return t
}

// IsStatus reports whether key is a status taint.
func (t Taints) IsStatus(key string) bool {
	return t.status[key] || strings.HasPrefix(key, taints.StatusPrefix)
}

// IsStartup reports whether key is a startup taint (and not a status one).
func (t Taints) IsStartup(key string) bool {
	if t.IsStatus(key) {
		return false
	}
	if t.startup[key] {
		return true
	}
	for _, p := range t.startupPrefixes {
		if p != "" && strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// NodeReadiness classifies node at now. A node is Ready when its Ready
// condition is true and no startup taint keeps pods off it; otherwise it
// counts as not started while younger than maxStartup, and unready after.
func (t Taints) NodeReadiness(node *apiv1.Node, now time.Time, maxStartup time.Duration) Readiness {
	if readyCondition(node) && !t.hasStartupTaint(node) {
		return Ready
	}
	if now.Sub(node.CreationTimestamp.Time) < maxStartup {
		return NotStarted
	}
	return Unready
}

// NodeSuspended is the condition type of upstream's suspended nodes.
const NodeSuspended apiv1.NodeConditionType = "Suspended"

// IsSuspended reports whether node has the condition Suspended=True: it
// counts as suspended (not ready, unready or not started) in nodes_count
// and the status ConfigMap, as upstream.
func IsSuspended(node *apiv1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == NodeSuspended {
			return c.Status == apiv1.ConditionTrue
		}
	}
	return false
}

func readyCondition(node *apiv1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == apiv1.NodeReady {
			return c.Status == apiv1.ConditionTrue
		}
	}
	return false
}

func (t Taints) hasStartupTaint(node *apiv1.Node) bool {
	for _, taint := range node.Spec.Taints {
		if t.IsStartup(taint.Key) {
			return true
		}
	}
	return false
}
