package framework

import (
	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
)

// releaseClaims undoes, on the snapshot's copies of pod's claims, what
// placing pod on node nodeName did to them, as the resourceclaim controller
// does once a pod is gone: pod no longer reserves them; a claim that is
// pod's own (made from a template for it) loses its allocation, and so does
// a shared claim that no other pod reserves any more. A claim allocated on
// another node than nodeName is left alone: the pod removed is then a twin
// (CopyNode) of the pod that really holds it.
func (s *Snapshot) releaseClaims(pod *apiv1.Pod, nodeName string) {
	if len(pod.Spec.ResourceClaims) == 0 {
		return
	}
	for _, pc := range pod.Spec.ResourceClaims {
		name := claimNameOf(pod, pc)
		if name == "" && pc.ResourceClaimTemplateName != nil {
			name = simClaimName(pod, pc.Name) // created in the simulation
		}
		c, ok := s.dra.claims[claimKey{pod.Namespace, name}]
		if !ok || s.allocatedElsewhere(c, nodeName) {
			continue
		}
		reserved, was := withoutConsumer(c.Status.ReservedFor, pod)
		own := pc.ResourceClaimTemplateName != nil && ownedBy(c, pod)
		if !was && !own {
			continue
		}
		cp := c.DeepCopy()
		cp.Status.ReservedFor = reserved
		if own || len(reserved) == 0 {
			cp.Status.Allocation = nil
		}
		s.putClaim(cp)
	}
}

// withoutConsumer returns refs without pod, and whether pod was among them.
func withoutConsumer(refs []resourceapi.ResourceClaimConsumerReference, pod *apiv1.Pod) (
	[]resourceapi.ResourceClaimConsumerReference, bool) {
	var out []resourceapi.ResourceClaimConsumerReference
	was := false
	for _, r := range refs {
		if r.Resource == "pods" && r.UID == pod.UID && r.Name == pod.Name {
			was = true
			continue
		}
		out = append(out, r)
	}
	return out, was
}

// ownedBy reports whether pod is the controller of claim c.
func ownedBy(c *resourceapi.ResourceClaim, pod *apiv1.Pod) bool {
	for _, o := range c.OwnerReferences {
		if o.Controller != nil && *o.Controller && o.Kind == "Pod" && o.UID == pod.UID && o.Name == pod.Name {
			return true
		}
	}
	return false
}

// allocatedElsewhere reports whether c is allocated to node-local devices
// of a node other than nodeName: it has a node selector and none of its
// devices is in a pool of nodeName's slices.
func (s *Snapshot) allocatedElsewhere(c *resourceapi.ResourceClaim, nodeName string) bool {
	a := c.Status.Allocation
	if a == nil || a.NodeSelector == nil {
		return false
	}
	pools := map[[2]string]bool{}
	for _, sl := range s.ResourceSlices(nodeName) {
		pools[[2]string{sl.Spec.Driver, sl.Spec.Pool.Name}] = true
	}
	for _, r := range a.Devices.Results {
		if pools[[2]string{r.Driver, r.Pool}] {
			return false
		}
	}
	return true
}

// DeviceUsage counts the devices the ResourceSlices of node name publish
// and how many of them allocated claims in the snapshot hold (a device
// shared by several claims counts once; admin access holds none, see
// holdsDevice). A node without slices has 0, 0.
func (s *Snapshot) DeviceUsage(name string) (allocated, total int) {
	slices := s.ResourceSlices(name)
	if len(slices) == 0 {
		return 0, 0
	}
	used := s.allocatedDevices()
	for _, sl := range slices {
		for _, d := range sl.Spec.Devices {
			total++
			if used.Has(structured.MakeDeviceID(sl.Spec.Driver, sl.Spec.Pool.Name, d.Name)) {
				allocated++
			}
		}
	}
	return allocated, total
}

// allocatedDevices is the set of devices allocated claims hold (admin
// access excepted), computed
// once per state of the claims (putClaim and Revert forget it).
func (s *Snapshot) allocatedDevices() sets.Set[structured.DeviceID] {
	if s.dra.allocated != nil {
		return s.dra.allocated
	}
	used := sets.New[structured.DeviceID]()
	for _, c := range s.dra.claims {
		if c.Status.Allocation == nil {
			continue
		}
		for i := range c.Status.Allocation.Devices.Results {
			if r := &c.Status.Allocation.Devices.Results[i]; holdsDevice(r) {
				used.Insert(structured.MakeDeviceID(r.Driver, r.Pool, r.Device))
			}
		}
	}
	s.dra.allocated = used
	return used
}
