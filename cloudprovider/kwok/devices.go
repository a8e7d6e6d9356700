package kwok

import (
	"context"
	"fmt"
	"time"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
)

// DriverDevices are the devices one DRA driver publishes on each node of a
// group: one ResourceSlice per node and driver, in a pool named after the
// node, as a node-local driver does.
type DriverDevices struct {
	// Driver is the DRA driver's name (a DNS subdomain, e.g. gpu.example.com).
	Driver string `json:"driver"`
	// Devices are the devices of one node: names, attributes, capacity,
	// and the counters a partitionable device consumes (consumesCounters).
	Devices []resourceapi.Device `json:"devices"`
	// SharedCounters are the counter sets each node's pool offers to
	// partitionable devices (e.g. one per GPU: its memory and compute
	// slices); see counters.go.
	SharedCounters []resourceapi.CounterSet `json:"sharedCounters,omitempty"`
}

// validateDevices checks what the API server would refuse in the slices
// built from list, so that the provider never publishes one it refuses.
func validateDevices(list []DriverDevices, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	drivers := map[string]bool{}
	for i, d := range list {
		p := path.Index(i)
		for _, msg := range validation.IsDNS1123Subdomain(d.Driver) {
			errs = append(errs, field.Invalid(p.Child("driver"), d.Driver, msg))
		}
		if drivers[d.Driver] {
			errs = append(errs, field.Duplicate(p.Child("driver"), d.Driver))
		}
		drivers[d.Driver] = true
		most := resourceapi.ResourceSliceMaxDevices
		if consumesCounters(d) {
			most = resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures
		}
		if len(d.Devices) == 0 || len(d.Devices) > most {
			errs = append(errs, field.Invalid(p.Child("devices"), len(d.Devices),
				fmt.Sprintf("want between 1 and %d devices", most)))
		}
		errs = append(errs, validateCounters(d, p)...)
		names := map[string]bool{}
		for j, dev := range d.Devices {
			dp := p.Child("devices").Index(j).Child("name")
			for _, msg := range validation.IsDNS1123Label(dev.Name) {
				errs = append(errs, field.Invalid(dp, dev.Name, msg))
			}
			if names[dev.Name] {
				errs = append(errs, field.Duplicate(dp, dev.Name))
			}
			names[dev.Name] = true
		}
	}
	return errs
}

// resourceSlices returns the slices the group's drivers publish for node:
// owned by the Node when it has a UID (a created Node), so that they go
// with it, as a kubelet's do. A driver with shared counters publishes them
// in a second slice of the same pool (the API server keeps counter sets and
// devices apart).
func (g *NodeGroup) resourceSlices(node *apiv1.Node) []*resourceapi.ResourceSlice {
	var out []*resourceapi.ResourceSlice
	for _, d := range g.cfg.Template.Devices {
		name := node.Name
		sl := &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: node.Name + "-" + d.Driver,
				Labels: map[string]string{NodeGroupAnnotation: g.cfg.Name}},
			Spec: resourceapi.ResourceSliceSpec{Driver: d.Driver, NodeName: &name,
				Pool:    resourceapi.ResourcePool{Name: node.Name, Generation: 1, ResourceSliceCount: 1},
				Devices: make([]resourceapi.Device, len(d.Devices))},
		}
		for i := range d.Devices {
			d.Devices[i].DeepCopyInto(&sl.Spec.Devices[i])
		}
		if node.UID != "" {
			sl.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
		}
		if counters := countersSlice(d, sl); counters != nil {
			sl.Spec.Pool.ResourceSliceCount = 2
			counters.Spec.Pool.ResourceSliceCount = 2
			out = append(out, counters)
		}
		out = append(out, sl)
	}
	return out
}

// publishSlicesAfter publishes node's slices after delay (the group's
// faults.resourceSliceDelay), in the background when there is one; the
// provider's shutdown waits for it or cancels it with ctx. A restart of the
// autoscaler during the delay leaves the node without slices.
func (p *Provider) publishSlicesAfter(ctx context.Context, g *NodeGroup, node *apiv1.Node, delay time.Duration) {
	if delay <= 0 {
		p.publishSlices(ctx, g, node)
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.publishSlices(ctx, g, node)
	}()
}

// publishSlices creates the ResourceSlices of a created node, playing its
// DRA drivers. A failure is logged: the node then offers no devices, which
// the autoscaler sees as it would a driver that did not start.
func (p *Provider) publishSlices(ctx context.Context, g *NodeGroup, node *apiv1.Node) {
	for _, sl := range g.resourceSlices(node) {
		_, err := p.client.ResourceV1().ResourceSlices().Create(ctx, sl, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) && ctx.Err() == nil {
			klog.FromContext(ctx).Error(err, "Publishing the ResourceSlice of a kwok node", "node", node.Name,
				"resourceSlice", sl.Name)
		}
	}
}
