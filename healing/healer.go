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
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
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
	ReplaceFirst         bool
	MaxPodEvictionTime   time.Duration
	MaxNodeProvisionTime time.Duration
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
	return &Healer{opts: opts, client: client, provider: provider, recorder: recorder, clock: clock.RealClock{},
		store: &store{client: client, namespace: opts.Namespace}, metrics: newHealMetrics(reg)}
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
	unhealthy := map[string]int{}
	total := 0
	for _, n := range loop.Nodes {
		g, err := h.provider.NodeGroupForNode(ctx, n)
		if err != nil || g == nil {
			continue // not autoscaled: never healed
		}
		total++
		groupSize[g.Id()]++
		kind, why, ok := h.trigger(n, now)
		if !ok || n.DeletionTimestamp != nil {
			continue
		}
		unhealthy[g.Id()]++
		if st.Heals[n.Name] != nil || hasTaintKey(n, "ToBeDeletedByClusterAutoscaler") {
			continue
		}
		cands = append(cands, candidate{node: n, group: g, kind: kind, why: why, controlPlan: isControlPlane(n)})
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
		r := &heal{Node: c.node.Name, Group: id, ProviderID: c.node.Spec.ProviderID, Reason: c.kind + ": " + c.why,
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

// advance moves one heal on as far as it can in this loop; it reports
// whether it changed a node group's size.
func (h *Healer) advance(ctx context.Context, st *state, r *heal, nodes map[string]*apiv1.Node, loop *processors.Loop,
	save func() bool) bool {
	logger := klog.FromContext(ctx).WithValues("node", r.Node, "nodeGroup", r.Group)
	now := loop.Now
	node := nodes[r.Node]
	setPhase := func(p string) {
		logger.V(2).Info("Heal phase", "from", r.Phase, "to", p)
		r.Phase, r.PhaseSince = p, now
	}
	changed := false
	for {
		switch r.Phase {
		case PhaseStarting:
			if node == nil {
				h.finish(st, r, now, "failed", "NodeGone", "the node disappeared before the heal touched it")
				return changed
			}
			if err := callHooks(ctx, h.opts.Hooks, h.hookRequest(r, PhaseStart), h.ignoredHook(r)); err != nil {
				h.finish(st, r, now, "failed", "HookFailed", "heal_start: "+err.Error()+"; the node was not touched")
				return changed
			}
			if err := h.cordon(ctx, r.Node, true); err != nil {
				logger.Error(err, "Cordoning a node to heal; retrying in the next loop")
				return changed
			}
			if h.opts.ReplaceFirst && !r.Increased {
				if g := h.group(ctx, node); g != nil {
					if target, err := g.TargetSize(ctx); err == nil && target < g.MaxSize() {
						if ok, err := h.increaseOnce(g, r, target, save); err != nil {
							logger.Error(err, "Asking for the replacement before the removal; it is asked for after it")
						} else if ok {
							changed = true
							logger.Info("Asked for the replacement of a node being healed", "targetBefore", target)
						}
					}
				}
			}
			if r.Increased {
				setPhase(PhaseSurging)
				return changed
			}
			setPhase(PhaseDraining)
		case PhaseSurging:
			if h.readyInGroup(ctx, r, loop) <= r.ReadyBefore {
				if now.Sub(r.PhaseSince) <= h.opts.MaxNodeProvisionTime {
					return changed
				}
				logger.Info("The replacement is not Ready within --max-node-provision-time; draining all the same")
			}
			setPhase(PhaseDraining)
		case PhaseDraining:
			if node == nil {
				r.DeleteIssued = true // gone already: nothing to delete
				setPhase(PhaseDeleting)
				continue
			}
			left := h.evict(ctx, r, node, loop, now.Sub(r.PhaseSince) > h.opts.MaxPodEvictionTime)
			if left > 0 {
				if now.Sub(r.PhaseSince) > h.opts.MaxPodEvictionTime && nodeReady(node) {
					if err := h.cordon(ctx, r.Node, false); err != nil {
						logger.Error(err, "Uncordoning a node whose heal failed")
					}
					h.finish(st, r, now, "failed", "EvictionTimeout", fmt.Sprintf("%d pods not evicted within --max-pod-eviction-time (%v); the node is uncordoned", left, h.opts.MaxPodEvictionTime))
				}
				return changed
			}
			setPhase(PhaseDeleting)
		case PhaseDeleting:
			if !r.DeleteIssued {
				if node == nil || node.DeletionTimestamp != nil {
					r.DeleteIssued = true
				} else {
					g := h.group(ctx, node)
					if g == nil {
						h.finish(st, r, now, "failed", "NoNodeGroup", "the node's group is gone")
						return changed
					}
					if err := g.DeleteNodes(ctx, []*apiv1.Node{node}); err != nil {
						if errors.Is(err, cloudprovider.ErrNotImplemented) {
							// The group cannot delete this instance by name:
							// never let it pick another one.
							if uerr := h.cordon(ctx, r.Node, false); uerr != nil {
								logger.Error(uerr, "Uncordoning a node whose heal failed")
							}
							h.finish(st, r, now, "failed", "CannotDeleteByName", "the node group cannot delete this instance by name: "+err.Error())
							return changed
						}
						logger.Error(err, "Deleting a node being healed; retrying in the next loop")
						return changed
					}
					r.DeleteIssued, changed = true, true
					logger.Info("Deleted a node being healed", "providerID", r.ProviderID)
				}
			}
			if !r.Increased {
				g := h.groupByID(ctx, r.Group)
				if g == nil {
					h.finish(st, r, now, "failed", "NoNodeGroup", "the node's group is gone; no replacement")
					return changed
				}
				target, err := g.TargetSize(ctx)
				if err == nil {
					_, err = h.increaseOnce(g, r, target, save)
				}
				if err != nil {
					logger.Error(err, "Asking for the replacement of a healed node; retrying in the next loop")
					return changed
				}
				changed = true
				logger.Info("Asked for the replacement of a healed node")
			}
			setPhase(PhaseReplacing)
		case PhaseReplacing:
			if h.readyInGroup(ctx, r, loop) <= r.ReadyBefore {
				if now.Sub(r.PhaseSince) > h.opts.MaxNodeProvisionTime {
					h.finish(st, r, now, "failed", "ReplacementNotReady", fmt.Sprintf("no replacement Ready within --max-node-provision-time (%v)", h.opts.MaxNodeProvisionTime))
				}
				return changed
			}
			setPhase(PhaseFinishing)
		case PhaseFinishing:
			if err := callHooks(ctx, h.opts.Hooks, h.hookRequest(r, PhaseEnd), h.ignoredHook(r)); err != nil {
				h.finish(st, r, now, "failed", "HookFailed", "heal_end: "+err.Error()+"; the node was replaced")
				return changed
			}
			h.finish(st, r, now, "succeeded", "Replaced", "the node was replaced and its replacement is Ready")
			return changed
		default:
			h.finish(st, r, now, "failed", "UnknownPhase", "unknown phase "+r.Phase)
			return changed
		}
	}
}

// increaseOnce asks for the replacement unless a previous run already did:
// the target before the increase is recorded first, and a target found
// above it means the increase went through. It reports whether it asked now.
func (h *Healer) increaseOnce(g cloudprovider.NodeGroup, r *heal, target int, save func() bool) (bool, error) {
	if r.TargetBefore != nil && target > *r.TargetBefore {
		r.Increased = true
		return false, nil
	}
	r.TargetBefore = &target
	if !save() {
		return false, errors.New("the healing state could not be written before the increase")
	}
	if err := g.IncreaseSize(context.Background(), 1); err != nil {
		return false, err
	}
	r.Increased = true
	return true, nil
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

// readyInGroup counts the Ready nodes of the heal's group, the healed node
// and nodes being healed aside.
func (h *Healer) readyInGroup(ctx context.Context, r *heal, loop *processors.Loop) int {
	ready := 0
	for _, n := range loop.Nodes {
		if n.Name == r.Node || !nodeReady(n) || hasTaintKey(n, Taint) {
			continue
		}
		if g, err := h.provider.NodeGroupForNode(ctx, n); err == nil && g != nil && g.Id() == r.Group {
			ready++
		}
	}
	return ready
}

// finish ends a heal: event, metrics, cooldown, record removed.
func (h *Healer) finish(st *state, r *heal, now time.Time, result, reason, msg string) {
	typ, event := apiv1.EventTypeNormal, "HealSucceeded"
	if result != "succeeded" {
		typ, event = apiv1.EventTypeWarning, "HealFailed"
	}
	h.event(r, typ, event, "%s: %s (node group %s, reason: %s)", reason, msg, r.Group, r.Reason)
	h.metrics.heals.WithLabelValues(result, reason).Inc()
	h.metrics.duration.WithLabelValues(result).Observe(now.Sub(r.Started).Seconds())
	st.Cooldown[r.Node] = now.Add(h.opts.Cooldown)
	delete(st.Heals, r.Node)
}

func (h *Healer) hookRequest(r *heal, phase string) HookRequest {
	return HookRequest{Phase: phase, Node: r.Node, NodeGroup: r.Group, ProviderID: r.ProviderID, Reason: r.Reason,
		ControlPlane: r.ControlPlane, Started: r.Started}
}

func (h *Healer) ignoredHook(r *heal) func(string, error) {
	return func(name string, err error) {
		h.event(r, apiv1.EventTypeWarning, "HealHookFailed", "Hook %s failed, ignored (failurePolicy Ignore): %v", name, err)
	}
}

func (h *Healer) group(ctx context.Context, n *apiv1.Node) cloudprovider.NodeGroup {
	g, err := h.provider.NodeGroupForNode(ctx, n)
	if err != nil {
		return nil
	}
	return g
}

func (h *Healer) groupByID(ctx context.Context, id string) cloudprovider.NodeGroup {
	groups, err := h.provider.NodeGroups(ctx)
	if err != nil {
		return nil
	}
	for _, g := range groups {
		if g.Id() == id {
			return g
		}
	}
	return nil
}

// cordon marks (on) or releases (off) a node being healed: unschedulable,
// the healing taint, and scale-down kept off it.
func (h *Healer) cordon(ctx context.Context, name string, on bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := h.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Spec.Unschedulable = on
		var taints []apiv1.Taint
		for _, t := range n.Spec.Taints {
			if t.Key != Taint {
				taints = append(taints, t)
			}
		}
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		if on {
			taints = append(taints, apiv1.Taint{Key: Taint, Value: "true", Effect: apiv1.TaintEffectNoSchedule})
			n.Annotations[scaleDownDisabled] = "true"
		} else {
			delete(n.Annotations, scaleDownDisabled)
		}
		n.Spec.Taints = taints
		_, err = h.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// evict asks the Eviction API to evict the node's pods (PDBs honoured; a
// refusal is retried in the next loop) and returns how many are left. With
// force, a node that is not Ready has its pods deleted: they cannot
// terminate anyway.
func (h *Healer) evict(ctx context.Context, r *heal, node *apiv1.Node, loop *processors.Loop, force bool) int {
	logger := klog.FromContext(ctx)
	left := 0
	for _, p := range loop.ScheduledPods {
		if p.Spec.NodeName != node.Name || p.Status.Phase == apiv1.PodSucceeded || p.Status.Phase == apiv1.PodFailed ||
			isDaemonSetPod(p) || p.Annotations[apiv1.MirrorPodAnnotationKey] != "" {
			continue
		}
		left++
		if force && !nodeReady(node) {
			zero := int64(0)
			err := h.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			if err != nil && !apierrors.IsNotFound(err) {
				logger.Error(err, "Deleting a pod of a NotReady node being healed", "pod", klog.KObj(p))
			}
			continue
		}
		if p.DeletionTimestamp != nil {
			continue
		}
		err := h.client.PolicyV1().Evictions(p.Namespace).Evict(ctx, &policyv1.Eviction{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}})
		switch {
		case err == nil, apierrors.IsNotFound(err):
		case apierrors.IsTooManyRequests(err):
			logger.V(2).Info("Eviction refused (disruption budget); retrying in the next loop", "pod", klog.KObj(p))
		default:
			logger.Error(err, "Evicting a pod of a node being healed", "pod", klog.KObj(p))
		}
	}
	return left
}

func nodeReady(n *apiv1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == apiv1.NodeReady {
			return c.Status == apiv1.ConditionTrue
		}
	}
	return false
}

func hasTaintKey(n *apiv1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

func isControlPlane(n *apiv1.Node) bool {
	_, ok := n.Labels[ControlPlaneLabel]
	return ok
}

func isDaemonSetPod(p *apiv1.Pod) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return true
		}
	}
	return false
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
