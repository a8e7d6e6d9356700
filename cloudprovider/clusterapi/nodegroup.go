package clusterapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// NodeGroup is one annotated MachineDeployment, MachineSet or MachinePool.
type NodeGroup struct {
	provider         *Provider
	kind             string
	obj              *unstructured.Unstructured
	minSize, maxSize int
	machines         []*unstructured.Unstructured
	instances        []cloudprovider.Instance
	// sets are a MachineDeployment's MachineSets (by owner or by
	// DeploymentNameLabel), to tell whether it is rolling out.
	sets []*unstructured.Unstructured

	mu     sync.Mutex
	target int
}

var _ cloudprovider.NodeGroup = (*NodeGroup)(nil)

// Id is <Kind>/<namespace>/<name>.
func (g *NodeGroup) Id() string { return g.kind + "/" + g.obj.GetNamespace() + "/" + g.obj.GetName() }

// MinSize implements cloudprovider.NodeGroup.
func (g *NodeGroup) MinSize() int { return g.minSize }

// MaxSize implements cloudprovider.NodeGroup.
func (g *NodeGroup) MaxSize() int { return g.maxSize }

// Debug implements cloudprovider.NodeGroup.
func (g *NodeGroup) Debug() string {
	return fmt.Sprintf("%s (min: %d, max: %d, replicas: %d)", g.Id(), g.minSize, g.maxSize, g.targetSize())
}

// Exist implements cloudprovider.NodeGroup.
func (g *NodeGroup) Exist() bool { return true }

// Autoprovisioned implements cloudprovider.NodeGroup.
func (g *NodeGroup) Autoprovisioned() bool { return false }

// AtomicIncreaseSize implements cloudprovider.NodeGroup.
func (g *NodeGroup) AtomicIncreaseSize(context.Context, int) error {
	return cloudprovider.ErrNotImplemented
}

// ForceDeleteNodes implements cloudprovider.NodeGroup.
func (g *NodeGroup) ForceDeleteNodes(context.Context, []*apiv1.Node) error {
	return cloudprovider.ErrNotImplemented
}

func (g *NodeGroup) targetSize() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.target
}

// TargetSize is spec.replicas as of the last Refresh and this loop's changes.
func (g *NodeGroup) TargetSize(context.Context) (int, error) { return g.targetSize(), nil }

// IncreaseSize implements cloudprovider.NodeGroup.
func (g *NodeGroup) IncreaseSize(ctx context.Context, delta int) error {
	if delta <= 0 {
		return fmt.Errorf("increasing size of node group %q: delta %d must be positive", g.Id(), delta)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.target+delta > g.maxSize {
		return fmt.Errorf("increasing size of node group %q by %d: %d is above max size %d",
			g.Id(), delta, g.target+delta, g.maxSize)
	}
	from, to, err := g.scale(ctx, g.target, g.target+delta, true)
	if err != nil {
		return fmt.Errorf("increasing size of node group %q by %d: %w", g.Id(), delta, err)
	}
	klog.FromContext(ctx).Info("Scaled Cluster API node group up", "nodeGroup", g.Id(), "from", from, "to", to)
	g.target = to
	return nil
}

// DecreaseTargetSize lowers replicas by -delta, no lower than the Machines
// that exist, so that no existing Machine is removed.
func (g *NodeGroup) DecreaseTargetSize(ctx context.Context, delta int) error {
	if delta >= 0 {
		return fmt.Errorf("decreasing target size of node group %q: delta %d must be negative", g.Id(), delta)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.target+delta < len(g.instances) {
		return fmt.Errorf("decreasing target size of node group %q by %d: %d would be below its %d existing instances",
			g.Id(), -delta, g.target+delta, len(g.instances))
	}
	// Never rebased on the autoscaler's own writes: what may be cancelled
	// is reckoned from this snapshot's instances.
	if _, _, err := g.scale(ctx, g.target, g.target+delta, false); err != nil {
		return fmt.Errorf("decreasing target size of node group %q by %d: %w", g.Id(), -delta, err)
	}
	klog.FromContext(ctx).Info("Lowered the target of a Cluster API node group", "nodeGroup", g.Id(), "from", g.target, "to", g.target+delta)
	g.target += delta
	return nil
}

// scale sets replicas from old to replicas through the scale subresource:
// it reads the Scale, refuses (as a transient error, nothing written) when
// its replicas are no longer old, and writes it back with its
// resourceVersion, so a concurrent change makes the update conflict. A
// conflict whose fresh read still shows old replicas was another write to
// the object (Cluster API's controllers update its status all the time):
// the write is tried again, a few times, with the new resourceVersion.
// (A JSON patch with a test operation cannot be used: a Scale of 0 replicas
// omits spec.replicas.)
//
// With rebase, replicas that differ from old only by the autoscaler's own
// earlier writes (another loop's, made after this snapshot was read: see
// Provider.ownScales) are taken as the new old, and the change is applied
// to them, within the group's min and max; replicas anyone else changed
// are refused as above. It returns the replicas it found and wrote.
func (g *NodeGroup) scale(ctx context.Context, old, replicas int, rebase bool) (int, int, error) {
	res := g.provider.client.Resource(g.provider.gvr(g.kind)).Namespace(g.obj.GetNamespace())
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return old, replicas, ctx.Err()
			case <-time.After(time.Duration(attempt*50) * time.Millisecond):
			}
		}
		sc, err := res.Get(ctx, g.obj.GetName(), metav1.GetOptions{}, "scale")
		if err != nil {
			return old, replicas, fmt.Errorf("reading the scale of %s/%s: %w", g.obj.GetNamespace(), g.obj.GetName(), err)
		}
		cur, _, err := unstructured.NestedInt64(sc.Object, "spec", "replicas") // absent means 0
		if err != nil {
			return old, replicas, fmt.Errorf("reading the scale of %s/%s: %w", g.obj.GetNamespace(), g.obj.GetName(), err)
		}
		if int(cur) != old && rebase && g.provider.ownScalesLead(g.scaleKey(), old, int(cur)) {
			delta := replicas - old
			old, replicas = int(cur), int(cur)+delta
			if replicas < g.minSize || replicas > g.maxSize {
				return old, replicas, fmt.Errorf("replicas of %s/%s are %d after the autoscaler's own earlier change: %d is outside %d..%d",
					g.obj.GetNamespace(), g.obj.GetName(), cur, replicas, g.minSize, g.maxSize)
			}
		}
		if int(cur) != old {
			return old, replicas, fmt.Errorf("%w: replicas of %s/%s are %d, not %d as last seen", cloudprovider.ErrTransient,
				g.obj.GetNamespace(), g.obj.GetName(), cur, old)
		}
		if err := unstructured.SetNestedField(sc.Object, int64(replicas), "spec", "replicas"); err != nil {
			return old, replicas, err
		}
		updated, err := res.Update(ctx, sc, metav1.UpdateOptions{}, "scale")
		if err == nil {
			g.provider.recordOwnScale(g.scaleKey(), old, replicas, updated.GetResourceVersion())
			return old, replicas, nil
		}
		if !apierrors.IsConflict(err) {
			if !refused(err) {
				err = fmt.Errorf("%w: %w", errOutcomeUnknown, err)
			}
			return old, replicas, fmt.Errorf("updating the scale of %s/%s: %w", g.obj.GetNamespace(), g.obj.GetName(), err)
		}
		lastErr = err
	}
	return old, replicas, fmt.Errorf("%w: replicas of %s/%s changed meanwhile: %w", cloudprovider.ErrTransient,
		g.obj.GetNamespace(), g.obj.GetName(), lastErr)
}

// refused reports whether err is the API server's answer that it did not
// apply a write: a 4xx status other than a timeout. Anything else (a
// server error, a timeout, no answer) may come after the write was applied.
func refused(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false
	}
	code := st.Status().Code
	return code >= 400 && code < 500 && code != http.StatusRequestTimeout
}

func (g *NodeGroup) hasInstance(id string) bool {
	for _, in := range g.instances {
		if id != "" && in.Id == id {
			return true
		}
	}
	return false
}

// machineOf finds the group's Machine of node by provider ID (or
// placeholder id), then by nodeRef; a Machine that the node's Cluster API
// annotations say is not its own never is.
func (g *NodeGroup) machineOf(n *apiv1.Node) *unstructured.Unstructured {
	for _, m := range g.machines {
		if n.Spec.ProviderID != "" && machineInstanceID(m) == n.Spec.ProviderID && nodeAgrees(n, m, true) {
			return m
		}
	}
	if n.Spec.ProviderID != "" {
		norm := cloudprovider.NormalizeProviderID(n.Spec.ProviderID)
		for _, m := range g.machines {
			if cloudprovider.NormalizeProviderID(machineInstanceID(m)) == norm && nodeAgrees(n, m, true) {
				return m
			}
		}
	}
	for _, m := range g.machines {
		if nodeRefName(m) != "" && nodeRefName(m) == n.Name && nodeAgrees(n, m, true) {
			return m
		}
	}
	return nil
}

// Nodes implements cloudprovider.NodeGroup.
func (g *NodeGroup) Nodes(context.Context) ([]cloudprovider.Instance, error) {
	return append([]cloudprovider.Instance(nil), g.instances...), nil
}

// buildInstances lists the group's Machines, with their states, and for a
// MachinePool the provider IDs of its list that no Machine stands for.
func (g *NodeGroup) buildInstances() []cloudprovider.Instance {
	var out []cloudprovider.Instance
	seen := map[string]bool{}
	for _, m := range g.machines {
		id := machineInstanceID(m)
		seen[id] = true
		out = append(out, cloudprovider.Instance{Id: id, Status: machineStatus(m)})
	}
	if g.kind == kindMachinePool {
		ids, _, _ := unstructured.NestedStringSlice(g.obj.Object, "spec", "providerIDList")
		for _, id := range ids {
			if id != "" && !seen[id] {
				seen[id] = true
				out = append(out, cloudprovider.Instance{Id: id, Status: &cloudprovider.InstanceStatus{State: cloudprovider.InstanceRunning}})
			}
		}
	}
	return out
}

// machineStatus maps a Machine's phase to an instance state. A Machine
// that has not finished being created and carries a failure reason or
// message is a failed creation: Cluster API v1beta1 set phase Failed, while
// v1beta2 keeps the phase (e.g. Provisioning) and reports the failure its
// infrastructure machine gave in status.deprecated.v1beta1.
func machineStatus(m *unstructured.Unstructured) *cloudprovider.InstanceStatus {
	if m.GetDeletionTimestamp() != nil {
		return &cloudprovider.InstanceStatus{State: cloudprovider.InstanceDeleting}
	}
	if _, ours := m.GetAnnotations()[OwnDeletionAnnotation]; ours {
		// Marked by DeleteNodes, its replica decrease made: going.
		return &cloudprovider.InstanceStatus{State: cloudprovider.InstanceDeleting}
	}
	phase, _, _ := unstructured.NestedString(m.Object, "status", "phase")
	switch phase {
	case "Running":
		return &cloudprovider.InstanceStatus{State: cloudprovider.InstanceRunning}
	case "Deleting", "Deleted":
		return &cloudprovider.InstanceStatus{State: cloudprovider.InstanceDeleting}
	}
	reason, msg, failed := failure(m)
	if phase == "Failed" || failed {
		return &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating, ErrorInfo: &cloudprovider.InstanceErrorInfo{
			ErrorClass: errorClass(reason), ErrorCode: reason, ErrorMessage: msg}}
	}
	// Pending, Provisioning, Provisioned, Unknown, or no phase yet.
	return &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating}
}

// errorClass: Cluster API's InsufficientResources is the cloud being out of
// capacity or quota (early back-off); any other reason is another error.
func errorClass(reason string) cloudprovider.InstanceErrorClass {
	if reason == "InsufficientResources" {
		return cloudprovider.OutOfResourcesErrorClass
	}
	return cloudprovider.OtherErrorClass
}

// failure returns failureReason and failureMessage (v1beta1 places, or the
// v1beta2 status.deprecated.v1beta1 ones), defaulted, and whether either
// was set.
func failure(m *unstructured.Unstructured) (reason, message string, found bool) {
	for _, path := range [][]string{{"status"}, {"status", "deprecated", "v1beta1"}} {
		r, _, _ := unstructured.NestedString(m.Object, append(path, "failureReason")...)
		msg, _, _ := unstructured.NestedString(m.Object, append(path, "failureMessage")...)
		if r != "" || msg != "" {
			reason, message, found = r, msg, true
			break
		}
	}
	if reason == "" {
		reason = "MachineFailed"
	}
	if message == "" {
		message = fmt.Sprintf("Machine %s/%s failed to be created", m.GetNamespace(), m.GetName())
	}
	return reason, message, found
}

// Per-group option annotations (upstream's keys).
const optionPrefix = "cluster.x-k8s.io/autoscaling-options-"

// GetOptions reads per-group overrides from the group's annotations;
// a value that does not parse is logged and the default kept.
func (g *NodeGroup) GetOptions(ctx context.Context, defaults config.NodeGroupAutoscalingOptions) (*config.NodeGroupAutoscalingOptions, error) {
	out := defaults
	found := false
	a := g.obj.GetAnnotations()
	floats := map[string]*float64{
		"scaledownutilizationthreshold":    &out.ScaleDownUtilizationThreshold,
		"scaledowngpuutilizationthreshold": &out.ScaleDownGPUUtilizationThreshold,
	}
	for k, dst := range floats {
		if v, ok := a[optionPrefix+k]; ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 0 || f > 1 {
				klog.FromContext(ctx).Info("Ignoring an invalid per-group option", "nodeGroup", g.Id(), "annotation", optionPrefix+k, "value", v)
				continue
			}
			*dst, found = f, true
		}
	}
	durations := map[string]*time.Duration{
		"scaledownunneededtime": &out.ScaleDownUnneededTime,
		"scaledownunreadytime":  &out.ScaleDownUnreadyTime,
		"maxnodeprovisiontime":  &out.MaxNodeProvisionTime,
		"maxnodelifetime":       &out.MaxNodeLifetime,
	}
	for k, dst := range durations {
		if v, ok := a[optionPrefix+k]; ok {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				klog.FromContext(ctx).Info("Ignoring an invalid per-group option", "nodeGroup", g.Id(), "annotation", optionPrefix+k, "value", v)
				continue
			}
			*dst, found = d, true
		}
	}
	// The disruption budget is passed on as written: the disruption engine
	// parses it, and logs and ignores one that does not parse.
	if v, ok := a[optionPrefix+"disruptionbudget"]; ok && strings.TrimSpace(v) != "" {
		out.DisruptionBudget, found = strings.TrimSpace(v), true
	}
	if !found {
		return nil, nil
	}
	return &out, nil
}
