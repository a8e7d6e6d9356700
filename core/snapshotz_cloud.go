package core

import (
	"context"
	"errors"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// SnapshotCloud is what the cloud provider told the loop of a snapshot:
// enough to answer the loop's questions again from the dump.
type SnapshotCloud struct {
	// CloudProvider is the provider's name.
	CloudProvider string `json:"CloudProvider,omitempty"`
	// NodeGroups are the provider's node groups, sorted by id.
	NodeGroups []*SnapshotNodeGroup `json:"NodeGroups"`
	// NodeGroupOfNode maps a node's name to its group's id; nodes of no
	// group are left out.
	NodeGroupOfNode map[string]string `json:"NodeGroupOfNode"`
	// ResourceLimits are the cluster-wide limits (nil when the provider
	// failed to give them).
	ResourceLimits *SnapshotResourceLimits `json:"ResourceLimits,omitempty"`
	// GPULabel and GPUTypes are the provider's GPU label and types;
	// GPUConfigs the GPU of each node (and template node) that has one,
	// by node name.
	GPULabel   string                              `json:"GPULabel,omitempty"`
	GPUTypes   []string                            `json:"GPUTypes,omitempty"`
	GPUConfigs map[string]*cloudprovider.GpuConfig `json:"GPUConfigs,omitempty"`
	// NodePrices is the price of one hour of each group's template node
	// (of one of its nodes for a group without a provider template) under
	// the provider's pricing model, by group id; nil when the provider has
	// none.
	NodePrices map[string]float64 `json:"NodePrices,omitempty"`
	// PodPrices is the provider's price of one hour of a pod, taken as
	// linear in its CPU and memory requests; nil without a pricing model.
	PodPrices *SnapshotPodPrices `json:"PodPrices,omitempty"`
}

// SnapshotPodPrices prices a pod at Base + cores·PerCore + GiB·PerGiB an
// hour: the provider's price of a pod without requests, and what one core
// and one GiB add to it.
type SnapshotPodPrices struct {
	Base    float64 `json:"Base"`
	PerCore float64 `json:"PerCore"`
	PerGiB  float64 `json:"PerGiB"`
}

// SnapshotNodeGroup is one node group as the loop saw it.
type SnapshotNodeGroup struct {
	Id              string `json:"Id"`
	MinSize         int    `json:"MinSize"`
	MaxSize         int    `json:"MaxSize"`
	TargetSize      int    `json:"TargetSize"`
	Debug           string `json:"Debug,omitempty"`
	Exist           bool   `json:"Exist"`
	Autoprovisioned bool   `json:"Autoprovisioned,omitempty"`
	// Instances are the group's instances, registered or not.
	Instances []SnapshotInstance `json:"Instances"`
	// Options are the group's overrides of the defaults (nil: none).
	Options *config.NodeGroupAutoscalingOptions `json:"Options,omitempty"`
	// Errors are the provider's failures to answer, by method
	// (TargetSize, Nodes, TemplateNodeInfo, GetOptions); a
	// TemplateNodeInfo that is not implemented is no error.
	Errors map[string]string `json:"Errors,omitempty"`
}

// SnapshotInstance is one instance of a node group.
type SnapshotInstance struct {
	Id           string                           `json:"Id"`
	State        cloudprovider.InstanceState      `json:"State,omitempty"`
	ErrorClass   cloudprovider.InstanceErrorClass `json:"ErrorClass,omitempty"`
	ErrorCode    string                           `json:"ErrorCode,omitempty"`
	ErrorMessage string                           `json:"ErrorMessage,omitempty"`
}

// SnapshotResourceLimits are the cluster-wide minimum and maximum of each
// limited resource.
type SnapshotResourceLimits struct {
	Min map[string]int64 `json:"Min"`
	Max map[string]int64 `json:"Max"`
}

// SnapshotObjects are the objects besides nodes and pods that the loop's
// drain rules and templates read.
type SnapshotObjects struct {
	DaemonSets             []*appsv1.DaemonSet             `json:"DaemonSets"`
	ReplicaSets            []*appsv1.ReplicaSet            `json:"ReplicaSets"`
	StatefulSets           []*appsv1.StatefulSet           `json:"StatefulSets"`
	Jobs                   []*batchv1.Job                  `json:"Jobs"`
	ReplicationControllers []*apiv1.ReplicationController  `json:"ReplicationControllers"`
	PodDisruptionBudgets   []*policyv1.PodDisruptionBudget `json:"PodDisruptionBudgets"`
	// ConfigMaps are those of the autoscaler's namespace that the loop
	// reads (the priority expander's).
	ConfigMaps []*apiv1.ConfigMap `json:"ConfigMaps,omitempty"`
	// DRA says the cluster serves resource.k8s.io/v1, whose objects the
	// simulation reads: ResourceSlices, ResourceClaims, DeviceClasses and
	// ResourceClaimTemplates.
	DRA                    bool                                 `json:"DRA,omitempty"`
	ResourceSlices         []*resourceapi.ResourceSlice         `json:"ResourceSlices,omitempty"`
	ResourceClaims         []*resourceapi.ResourceClaim         `json:"ResourceClaims,omitempty"`
	DeviceClasses          []*resourceapi.DeviceClass           `json:"DeviceClasses,omitempty"`
	ResourceClaimTemplates []*resourceapi.ResourceClaimTemplate `json:"ResourceClaimTemplates,omitempty"`
}

// snapshotCloud records into snap what the provider says of obs's groups
// and nodes. The provider's failures are recorded, not returned.
func (a *Autoscaler) snapshotCloud(ctx context.Context, obs *Observation, snap *DebuggingSnapshot) {
	c := &snap.SnapshotCloud
	c.CloudProvider = a.provider.Name()
	c.NodeGroupOfNode = map[string]string{}
	c.GPUConfigs = map[string]*cloudprovider.GpuConfig{}
	c.NodeGroups = []*SnapshotNodeGroup{}
	for _, g := range obs.NodeGroups {
		c.NodeGroups = append(c.NodeGroups, a.snapshotGroup(ctx, g))
	}
	sort.Slice(c.NodeGroups, func(i, j int) bool { return c.NodeGroups[i].Id < c.NodeGroups[j].Id })
	for _, n := range obs.Nodes {
		if g, err := a.provider.NodeGroupForNode(ctx, n); err == nil && g != nil {
			c.NodeGroupOfNode[n.Name] = g.Id()
		}
		if gpu := a.provider.GetNodeGpuConfig(ctx, n); gpu != nil {
			c.GPUConfigs[n.Name] = gpu
		}
	}
	for _, tn := range snap.TemplateNodes {
		if gpu := a.provider.GetNodeGpuConfig(ctx, tn.Node); gpu != nil {
			c.GPUConfigs[tn.Node.Name] = gpu
		}
	}
	if l, err := a.provider.GetResourceLimiter(ctx); err == nil && l != nil {
		c.ResourceLimits = &SnapshotResourceLimits{Min: map[string]int64{}, Max: map[string]int64{}}
		for _, r := range l.GetResources() {
			if l.HasMinLimitSet(r) {
				c.ResourceLimits.Min[r] = l.GetMin(r)
			}
			if l.HasMaxLimitSet(r) {
				c.ResourceLimits.Max[r] = l.GetMax(r)
			}
		}
	}
	c.GPULabel = a.provider.GPULabel()
	for t := range a.provider.GetAvailableGPUTypes(ctx) {
		c.GPUTypes = append(c.GPUTypes, t)
	}
	sort.Strings(c.GPUTypes)
	a.snapshotPrices(ctx, obs, snap)
}

// snapshotGroup records one node group.
func (a *Autoscaler) snapshotGroup(ctx context.Context, g cloudprovider.NodeGroup) *SnapshotNodeGroup {
	sg := &SnapshotNodeGroup{Id: g.Id(), MinSize: g.MinSize(), MaxSize: g.MaxSize(), Debug: g.Debug(), Exist: g.Exist(),
		Autoprovisioned: g.Autoprovisioned(), Instances: []SnapshotInstance{}, Errors: map[string]string{}}
	if size, err := g.TargetSize(ctx); err != nil {
		sg.Errors["TargetSize"] = err.Error()
	} else {
		sg.TargetSize = size
	}
	if instances, err := g.Nodes(ctx); err != nil {
		sg.Errors["Nodes"] = err.Error()
	} else {
		for _, in := range instances {
			si := SnapshotInstance{Id: in.Id}
			if in.Status != nil {
				si.State = in.Status.State
				if ei := in.Status.ErrorInfo; ei != nil {
					si.ErrorClass, si.ErrorCode, si.ErrorMessage = ei.ErrorClass, ei.ErrorCode, ei.ErrorMessage
				}
			}
			sg.Instances = append(sg.Instances, si)
		}
	}
	if _, err := g.TemplateNodeInfo(ctx); err != nil && !errors.Is(err, cloudprovider.ErrNotImplemented) {
		sg.Errors["TemplateNodeInfo"] = err.Error()
	}
	if o, err := g.GetOptions(ctx, a.opts.NodeGroupDefaults); err != nil && !errors.Is(err, cloudprovider.ErrNotImplemented) {
		sg.Errors["GetOptions"] = err.Error()
	} else if err == nil {
		sg.Options = o
	}
	if len(sg.Errors) == 0 {
		sg.Errors = nil
	}
	return sg
}

// snapshotPrices records the hourly price of each group's template node
// (or of one of its nodes) and the pod price's basis, when the provider
// has a pricing model.
func (a *Autoscaler) snapshotPrices(ctx context.Context, obs *Observation, snap *DebuggingSnapshot) {
	pricing, err := a.provider.Pricing(ctx)
	if err != nil || pricing == nil {
		return
	}
	start := snap.StartTimestamp
	end := start.Add(time.Hour)
	prices := map[string]float64{}
	for id, tn := range snap.TemplateNodes {
		if p, err := pricing.NodePrice(ctx, tn.Node, start, end); err == nil {
			prices[id] = p
		}
	}
	for _, n := range obs.Nodes {
		id, ok := snap.NodeGroupOfNode[n.Name]
		if _, priced := prices[id]; !ok || priced {
			continue
		}
		if p, err := pricing.NodePrice(ctx, n, start, end); err == nil {
			prices[id] = p
		}
	}
	snap.NodePrices = prices
	podPrice := func(cpu, mem string) (float64, error) {
		pod := &apiv1.Pod{Spec: apiv1.PodSpec{Containers: []apiv1.Container{{Name: "c"}}}}
		pod.Spec.Containers[0].Resources.Requests = apiv1.ResourceList{}
		if cpu != "" {
			pod.Spec.Containers[0].Resources.Requests[apiv1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			pod.Spec.Containers[0].Resources.Requests[apiv1.ResourceMemory] = resource.MustParse(mem)
		}
		return pricing.PodPrice(ctx, pod, start, end)
	}
	base, err1 := podPrice("", "")
	perCore, err2 := podPrice("1", "")
	gib, err3 := podPrice("", "1Gi")
	if err := errors.Join(err1, err2, err3); err == nil {
		snap.PodPrices = &SnapshotPodPrices{Base: base, PerCore: perCore - base, PerGiB: gib - base}
	}
}
