package core

import (
	"context"
	"errors"
	"sort"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/snapshotdump"
)

// The cloud's part of the dump, in package snapshotdump.
type (
	SnapshotCloud          = snapshotdump.SnapshotCloud
	SnapshotPodPrices      = snapshotdump.SnapshotPodPrices
	SnapshotNodeGroup      = snapshotdump.SnapshotNodeGroup
	SnapshotInstance       = snapshotdump.SnapshotInstance
	SnapshotResourceLimits = snapshotdump.SnapshotResourceLimits
	SnapshotObjects        = snapshotdump.SnapshotObjects
)

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
	if o, err := g.GetOptions(ctx, a.opts.ClusterState.NodeGroupDefaults); err != nil && !errors.Is(err, cloudprovider.ErrNotImplemented) {
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
