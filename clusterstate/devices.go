package clusterstate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// SliceLister lists the cluster's ResourceSlices (an informer's view);
// simulator/framework's DRA source implements it.
type SliceLister interface {
	ResourceSlices() ([]*resourceapi.ResourceSlice, error)
}

// RegistryOption configures a Registry.
type RegistryOption func(*Registry)

// WithResourceSlices lets the registry check that a node publishes the DRA
// devices its group's template says its nodes have: until it does, the node
// counts as not ready (resource unready). Without it only the GPU rule
// (device-plugin GPUs) applies.
func WithResourceSlices(l SliceLister) RegistryOption {
	return func(r *Registry) { r.slices = l }
}

// deviceCheck finds, during one Update, the nodes whose Ready condition is
// true but whose devices are not there yet: the DRA devices of the group's
// template not all published as ResourceSlices, or a GPU node (the
// provider's GPU label, or a template with the GPU resource) whose GPU
// extended resource is still absent or zero, as while its device plugin
// starts. Templates and slices are read once per Update, and only when a
// node needs them.
type deviceCheck struct {
	ctx       context.Context
	provider  cloudprovider.CloudProvider
	slices    SliceLister
	templates map[string]*cloudprovider.NodeInfo // nil: unknown
	published map[string]map[string]int          // node -> driver -> devices
	// nodeSlices are each node's node-local slices of the newest
	// generation of their pool; incomplete are the driver/pool keys whose
	// newest generation has fewer slices than it says.
	nodeSlices map[string][]*resourceapi.ResourceSlice
	incomplete map[string]bool
	// listFailed: the slices could not be listed; nothing is checked.
	listFailed bool
	// members are the names of each group's nodes (by group id).
	members map[string][]string
}

func newDeviceCheck(ctx context.Context, provider cloudprovider.CloudProvider, slices SliceLister,
	members map[string][]string) *deviceCheck {
	return &deviceCheck{ctx: ctx, provider: provider, slices: slices, templates: map[string]*cloudprovider.NodeInfo{},
		members: members}
}

// unready returns why node of ng has not got its devices yet, or "".
func (d *deviceCheck) unready(node *apiv1.Node, ng cloudprovider.NodeGroup) string {
	_, labelled := node.Labels[d.provider.GPULabel()]
	if ng != nil && d.slices == nil && !labelled {
		return "" // as below, without finding the GPU resource (most nodes, every loop)
	}
	gpuResource := cloudprovider.NodeGPUResource(node)
	if c := d.provider.GetNodeGpuConfig(d.ctx, node); c != nil && c.ExtendedResourceName != "" {
		gpuResource = c.ExtendedResourceName
	}
	if ng == nil {
		// A node of no group: only upstream's GPU-label rule applies.
		return devicesUnready(node, nil, nil, nil, labelled, gpuResource)
	}
	if d.slices == nil && (!labelled || hasGPU(node.Status.Allocatable, gpuResource)) {
		return "" // nothing to check without reading the template
	}
	tmpl := d.template(ng)
	var tmplNode *apiv1.Node
	var want, published map[string]int
	if tmpl != nil {
		tmplNode = tmpl.Node
	}
	if d.slices != nil {
		switch {
		case tmpl != nil && len(tmpl.ResourceSlices) > 0:
			want = devicesPerDriver(tmpl.ResourceSlices)
		case tmpl == nil:
			want = d.peerDevices(ng.Id())
		}
		if len(want) > 0 {
			published = d.publishedOn(node.Name)
		}
		if d.listFailed {
			return ""
		}
	}
	return devicesUnready(node, tmplNode, want, published, labelled, gpuResource)
}

func devicesPerDriver(slices []*resourceapi.ResourceSlice) map[string]int {
	out := map[string]int{}
	for _, sl := range slices {
		out[sl.Spec.Driver] += len(sl.Spec.Devices)
	}
	return out
}

// peerDevices is, for a group without a template of the provider's (one
// templated from its nodes), the most devices per driver any of its nodes
// publishes: the nodes of a group are alike, so each is expected to
// publish as many.
func (d *deviceCheck) peerDevices(group string) map[string]int {
	out := map[string]int{}
	for _, name := range d.members[group] {
		for drv, n := range d.publishedOn(name) {
			out[drv] = max(out[drv], n)
		}
	}
	return out
}

// devicesUnready is the rule: node (labelled with the provider's GPU
// label or not) lacks devices its group's nodes have: fewer devices
// published per DRA driver than want, or no GPU resource while tmplNode
// (the template's node, nil when unknown) has it or another of the
// resources counted as GPUs (cloudprovider.GPUResourceNames), or, by upstream's
// GPU-label rule, while labelled, unless the group offers its devices
// through DRA (want not empty: no device plugin resource to wait for).
func devicesUnready(node, tmplNode *apiv1.Node, want, published map[string]int, labelled bool,
	gpuResource apiv1.ResourceName) string {
	drivers := make([]string, 0, len(want))
	for d := range want {
		drivers = append(drivers, d)
	}
	sort.Strings(drivers)
	for _, drv := range drivers {
		if published[drv] < want[drv] {
			return fmt.Sprintf("DRA driver %s published %d of the %d devices of the node group's nodes",
				drv, published[drv], want[drv])
		}
	}
	if hasGPU(node.Status.Allocatable, gpuResource) {
		return ""
	}
	expected := labelled && len(want) == 0
	if tmplNode != nil {
		for _, l := range []apiv1.ResourceList{tmplNode.Status.Capacity, tmplNode.Status.Allocatable} {
			if r := cloudprovider.GPUResourceIn(l); r != "" || hasResource(l, gpuResource) {
				expected = true
				if r != "" {
					gpuResource = r
				}
				break
			}
		}
	}
	if expected {
		return fmt.Sprintf("GPU resource %s is not allocatable yet", gpuResource)
	}
	return ""
}

// hasGPU reports whether l has a positive quantity of gpuResource (the
// provider's GPU resource for the node) or of any of the resources counted
// as GPUs (cloudprovider.GPUResourceNames).
func hasGPU(l apiv1.ResourceList, gpuResource apiv1.ResourceName) bool {
	return hasResource(l, gpuResource) || cloudprovider.GPUResourceIn(l) != ""
}

func hasResource(l apiv1.ResourceList, name apiv1.ResourceName) bool {
	q, ok := l[name]
	return ok && q.Sign() > 0
}

// template is ng's template, read once per Update; nil when the provider
// has none (a group templated from its nodes) or fails to give it.
func (d *deviceCheck) template(ng cloudprovider.NodeGroup) *cloudprovider.NodeInfo {
	if t, ok := d.templates[ng.Id()]; ok {
		return t
	}
	t, err := ng.TemplateNodeInfo(d.ctx)
	if err != nil {
		if !errors.Is(err, cloudprovider.ErrNotImplemented) {
			klog.FromContext(d.ctx).V(4).Info("Template unavailable for the device readiness check", "nodeGroup", ng.Id(),
				"err", err)
		}
		t = nil
	}
	d.templates[ng.Id()] = t
	return t
}

// publishedOn counts the devices of node-local ResourceSlices per driver
// on nodeName (the newest generation of each pool only), listing the
// slices once per Update.
func (d *deviceCheck) publishedOn(nodeName string) map[string]int {
	if d.published == nil {
		d.published = map[string]map[string]int{}
		list, err := d.slices.ResourceSlices()
		if err != nil {
			klog.FromContext(d.ctx).Error(err, "Listing ResourceSlices for the device readiness check; not checking DRA devices in this loop")
			d.listFailed = true
			return nil
		}
		newest := map[string]int64{} // driver/pool -> generation
		for _, sl := range list {
			k := sl.Spec.Driver + "/" + sl.Spec.Pool.Name
			newest[k] = max(newest[k], sl.Spec.Pool.Generation)
		}
		d.nodeSlices, d.incomplete = map[string][]*resourceapi.ResourceSlice{}, map[string]bool{}
		seen := map[string]int64{} // driver/pool -> slices of the newest generation
		for _, sl := range list {
			k := sl.Spec.Driver + "/" + sl.Spec.Pool.Name
			if sl.Spec.NodeName == nil || sl.Spec.Pool.Generation < newest[k] {
				continue
			}
			seen[k]++
			d.incomplete[k] = seen[k] < sl.Spec.Pool.ResourceSliceCount
			d.nodeSlices[*sl.Spec.NodeName] = append(d.nodeSlices[*sl.Spec.NodeName], sl)
			m := d.published[*sl.Spec.NodeName]
			if m == nil {
				m = map[string]int{}
				d.published[*sl.Spec.NodeName] = m
			}
			m[sl.Spec.Driver] += len(sl.Spec.Devices)
		}
	}
	return d.published[nodeName]
}

// DevicesReadiness corrects readiness, a node's readiness by its Ready
// condition and taints, for a node of the group whose devices are not there
// yet (ResourceUnreadyNodes): not started while the registry counted it so,
// unready after.
func (g *GroupState) DevicesReadiness(name string, readiness Readiness) Readiness {
	if readiness != Ready || !slices.Contains(g.ResourceUnreadyNodes, name) {
		return readiness
	}
	if slices.Contains(g.NotStartedNodes, name) {
		return NotStarted
	}
	return Unready
}
