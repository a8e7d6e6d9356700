package healing

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/yaml"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
)

// scaleDownDisabled is upstream's annotation that keeps scale-down off a
// node; a node being healed carries it so that only healing removes it.
const scaleDownDisabled = "cluster-autoscaler.kubernetes.io/scale-down-disabled"

// Options configure the Healer.
type Options struct {
	Policies []Policy
	Hooks    []Hook
	// MaxConcurrent heals in flight at once.
	MaxConcurrent int
	// Cooldown: a node healed (or whose heal failed) is not healed again
	// before this has passed.
	Cooldown time.Duration
	// MaxUnhealthyPercent: when more than this share of a group's nodes
	// (or of the cluster's) need healing at once, that is an outage, not a
	// node fault, and none of them is healed. One node alone always may be.
	MaxUnhealthyPercent float64
	DryRun              bool
	// ReplaceFirst asks for the replacement before removing the node when
	// the group is below its max size, so capacity never dips.
	ReplaceFirst       bool
	MaxPodEvictionTime time.Duration
	// MaxNodeProvisionTime bounds the waits of a heal (the replacement, the
	// provider, an instance going) and is the grace of a new node: a node
	// younger than this is not healed for its Ready condition.
	MaxNodeProvisionTime time.Duration
	// HookWait is the longest one loop waits for the hooks of a heal's
	// phase (default 1s); slower hooks go on outside the loop and the heal
	// waits in its phase for their answer.
	HookWait time.Duration
	// Namespace holds the state ConfigMap.
	Namespace string
}

// Healer heals nodes; it is a processors.RepairProcessor.
type Healer struct {
	opts     Options
	client   kubernetes.Interface
	provider cloudprovider.CloudProvider
	recorder record.EventRecorder
	clock    clock.PassiveClock
	store    *store
	metrics  *healMetrics
	hooks    *hookRunner
	// mu guards st against StatusSections, called by the status writer.
	mu sync.Mutex
	// st is the state as last written (or read at the first loop); a
	// failed write keeps it and is retried, a conflict (another writer)
	// drops it and the next loop reads the ConfigMap again.
	st *state
}

var _ processors.RepairProcessor = (*Healer)(nil)

// New returns a Healer; reg (may be nil) gets its metrics.
func New(opts Options, client kubernetes.Interface, provider cloudprovider.CloudProvider, recorder record.EventRecorder,
	reg prometheus.Registerer) *Healer {
	if opts.MaxConcurrent < 1 {
		opts.MaxConcurrent = 1
	}
	if opts.HookWait <= 0 {
		opts.HookWait = time.Second
	}
	m := newHealMetrics(reg)
	hooks := &hookRunner{observe: func(phase string, took time.Duration, err error) {
		result := "ok"
		if err != nil {
			result = "failed"
		}
		m.hooks.WithLabelValues(phase, result).Observe(took.Seconds())
	}}
	return &Healer{opts: opts, client: client, provider: provider, recorder: recorder, clock: clock.RealClock{},
		store: &store{client: client, namespace: opts.Namespace}, metrics: m, hooks: hooks}
}

// Repair advances the heals in flight and starts new ones. It reports a
// change (ending the loop) only when it changed a node group's size.
func (h *Healer) Repair(ctx context.Context, loop *processors.Loop) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	logger := klog.FromContext(ctx).WithName("healing")
	ctx = klog.NewContext(ctx, logger)
	if h.st == nil {
		st, err := h.store.load(ctx)
		if err != nil {
			logger.Error(err, "Node healing skipped this loop")
			return false
		}
		h.st = st
	}
	st := h.st
	save := func() bool {
		err := h.store.save(ctx, st)
		if err == nil {
			return true
		}
		logger.Error(err, "Recording the healing state; retrying in the next loop")
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			h.st = nil
		}
		return false
	}
	now := loop.Now
	for n, until := range st.Cooldown {
		if now.After(until) {
			delete(st.Cooldown, n)
		}
	}
	nodes := map[string]*apiv1.Node{}
	for _, n := range loop.Nodes {
		nodes[n.Name] = n
	}
	// New heals are recorded before anything is done for them, then every
	// heal in flight moves on; the state is written after each step.
	if h.start(ctx, st, loop) && !save() {
		return false
	}
	changed := false
	names := make([]string, 0, len(st.Heals))
	for n := range st.Heals {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		if h.advance(ctx, st, st.Heals[name], nodes, loop, save) {
			changed = true
		}
		if !save() {
			return changed
		}
	}
	return changed
}

// trigger says why n needs healing, if it does.
func (h *Healer) trigger(n *apiv1.Node, now time.Time) (kind, reason string, ok bool) {
	if v, ok := n.Annotations[Annotation]; ok {
		if v == "" {
			v = "requested"
		}
		return "annotation", v, true
	}
	for _, p := range h.opts.Policies {
		for _, c := range n.Status.Conditions {
			if c.Type == p.Type && c.Status == p.Status && now.Sub(c.LastTransitionTime.Time) >= p.For {
				return string(p.Type), fmt.Sprintf("condition %s=%s for %v or more", p.Type, p.Status, p.For), true
			}
		}
	}
	return "", "", false
}

type candidate struct {
	node        *apiv1.Node
	group       cloudprovider.NodeGroup
	kind, why   string
	controlPlan bool
}

// start finds the nodes that need healing and starts as many heals as the
// limits allow; it reports whether the state changed.
func (h *Healer) start(ctx context.Context, st *state, loop *processors.Loop) bool {
	logger := klog.FromContext(ctx)
	now := loop.Now
	groupSize := map[string]int{}
	var cands []candidate
	// unhealthy counts, per group, the nodes that need healing and the
	// heals in flight (whatever their node's conditions say now), so that
	// flapping nodes cannot take more than the breaker's share at once.
	unhealthy := map[string]int{}
	total := 0
	seen := map[string]bool{}
	for _, n := range loop.Nodes {
		g, err := h.provider.NodeGroupForNode(ctx, n)
		if err != nil || g == nil {
			continue // not autoscaled (or not known this loop): never healed
		}
		seen[n.Name] = true
		total++
		groupSize[g.Id()]++
		if st.Heals[n.Name] != nil {
			unhealthy[g.Id()]++
			continue
		}
		kind, why, ok := h.trigger(n, now)
		if !ok || n.DeletionTimestamp != nil {
			continue
		}
		if kind == string(apiv1.NodeReady) && now.Sub(n.CreationTimestamp.Time) < h.opts.MaxNodeProvisionTime {
			logger.V(4).Info("New node not healed yet for its Ready condition: younger than --max-node-provision-time",
				"node", n.Name, "created", n.CreationTimestamp.Time)
			continue
		}
		unhealthy[g.Id()]++
		if hasTaintKey(n, "ToBeDeletedByClusterAutoscaler") {
			continue
		}
		cands = append(cands, candidate{node: n, group: g, kind: kind, why: why, controlPlan: isControlPlane(n)})
	}
	for name, r := range st.Heals {
		if !seen[name] { // its Node is gone already: still in flight
			unhealthy[r.Group]++
			groupSize[r.Group]++
			total++
		}
	}
	all := 0
	for _, c := range unhealthy {
		all += c
	}
	h.metrics.unhealthy.Set(float64(all))
	clusterTripped := all > max(1, int(h.opts.MaxUnhealthyPercent/100*float64(total)))
	changed := false
	for _, c := range cands {
		id := c.group.Id()
		switch {
		case clusterTripped:
			h.skip(c, "TooManyUnhealthyNodes", fmt.Sprintf("%d of the cluster's %d nodes need healing at once, more than %v%%: an outage, not a node fault; none is healed",
				all, total, h.opts.MaxUnhealthyPercent))
			continue
		case unhealthy[id] > max(1, int(h.opts.MaxUnhealthyPercent/100*float64(groupSize[id]))):
			h.skip(c, "TooManyUnhealthyNodes", fmt.Sprintf("%d of node group %s's %d nodes need healing at once, more than %v%%: an outage, not a node fault; none is healed",
				unhealthy[id], id, groupSize[id], h.opts.MaxUnhealthyPercent))
			continue
		case !st.Cooldown[c.node.Name].IsZero():
			logger.V(4).Info("Node in healing cooldown", "node", c.node.Name, "until", st.Cooldown[c.node.Name])
			continue
		case c.controlPlan && !hooksForControlPlane(h.opts.Hooks):
			h.skip(c, "ControlPlaneWithoutHooks", "a control-plane node is healed only when a hook is configured for control-plane nodes (controlPlane: true)")
			continue
		case len(st.Heals) >= h.opts.MaxConcurrent:
			logger.V(4).Info("Node waits: --max-concurrent-heals heals in flight", "node", c.node.Name, "inFlight", len(st.Heals))
			continue
		case h.opts.DryRun:
			h.skip(c, "DryRun", "would be healed ("+c.why+"), but --node-healing-dry-run is set")
			continue
		}
		ready := 0
		for _, n := range loop.Nodes {
			if n.Name != c.node.Name && nodeReady(n) && !hasTaintKey(n, Taint) {
				if g, err := h.provider.NodeGroupForNode(ctx, n); err == nil && g != nil && g.Id() == id {
					ready++
				}
			}
		}
		r := &heal{Node: c.node.Name, Group: id, ProviderID: c.node.Spec.ProviderID, Reason: c.kind + ": " + c.why, Kind: c.kind,
			Phase: PhaseStarting, Started: now, PhaseSince: now, ReadyBefore: ready, ControlPlane: c.controlPlan}
		st.Heals[r.Node] = r
		h.metrics.started.WithLabelValues(c.kind).Inc()
		h.event(r, apiv1.EventTypeNormal, "HealStarted", "Healing node %s of %s: %s", r.Node, r.Group, r.Reason)
		logger.Info("Healing a node", "node", r.Node, "nodeGroup", r.Group, "reason", r.Reason)
		changed = true
	}
	return changed
}

func (h *Healer) skip(c candidate, reason, msg string) {
	ref := &apiv1.ObjectReference{Kind: "Node", Name: c.node.Name, UID: c.node.UID}
	h.recorder.Eventf(ref, apiv1.EventTypeWarning, "HealSkipped", "%s: %s", reason, msg)
	h.metrics.heals.WithLabelValues("skipped", reason).Inc()
}

func (h *Healer) event(r *heal, typ, reason, format string, args ...any) {
	ref := &apiv1.ObjectReference{Kind: "Node", Name: r.Node}
	h.recorder.Eventf(ref, typ, reason, format, args...)
}

// StatusKey is the status ConfigMap key of the heals in flight.
const StatusKey = "healing"

// StatusSections is the status ConfigMap's healing key: every heal in
// flight with its phase (empty when none, which removes the key).
func (h *Healer) StatusSections() map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.st == nil || len(h.st.Heals) == 0 {
		return map[string]string{StatusKey: ""}
	}
	type line struct {
		Node       string `json:"node"`
		NodeGroup  string `json:"nodeGroup"`
		Phase      string `json:"phase"`
		PhaseSince string `json:"phaseSince"`
		Started    string `json:"started"`
		Reason     string `json:"reason"`
	}
	var out []line
	for _, r := range h.st.Heals {
		out = append(out, line{Node: r.Node, NodeGroup: r.Group, Phase: r.Phase,
			PhaseSince: r.PhaseSince.UTC().Format(time.RFC3339), Started: r.Started.UTC().Format(time.RFC3339), Reason: r.Reason})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	b, err := yaml.Marshal(out)
	if err != nil {
		return nil
	}
	return map[string]string{StatusKey: string(b)}
}

// Validate checks options at start-up.
func (o Options) Validate() error {
	var errs []error
	if o.MaxConcurrent < 1 {
		errs = append(errs, fmt.Errorf("--max-concurrent-heals must be at least 1, got %d", o.MaxConcurrent))
	}
	if o.Cooldown < 0 {
		errs = append(errs, fmt.Errorf("--node-healing-cooldown must not be negative"))
	}
	if o.MaxUnhealthyPercent <= 0 || o.MaxUnhealthyPercent > 100 {
		errs = append(errs, fmt.Errorf("--node-healing-max-unhealthy-percent must be in (0, 100], got %v", o.MaxUnhealthyPercent))
	}
	seen := map[string]bool{}
	for _, p := range o.Policies {
		k := string(p.Type) + "=" + string(p.Status)
		if seen[k] {
			errs = append(errs, fmt.Errorf("--node-healing-policy: %s given twice", k))
		}
		seen[k] = true
	}
	return errors.Join(errs...)
}

// PolicyStrings renders policies for logs.
func PolicyStrings(ps []Policy) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	return strings.Join(out, ",")
}
