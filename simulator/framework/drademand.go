package framework

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// DeviceDemand is how many devices of one DeviceClass a pod's claims ask
// for on one node; All is set for a request of every matching device
// (allocationMode All), whose count the node decides.
type DeviceDemand struct {
	Class string
	Count int64
	All   bool
}

// String words the demand for events: "8 devices of class gpu.example.com".
func (d DeviceDemand) String() string {
	switch {
	case d.All:
		return "all devices of class " + d.Class
	case d.Count == 1:
		return "1 device of class " + d.Class
	}
	return fmt.Sprintf("%d devices of class %s", d.Count, d.Class)
}

// DeviceDemands returns what pod's resource claims ask for, per device
// class (sorted by class): the claims the snapshot holds (shared claims, or
// claims already made from the pod's templates) or else the pod's claim
// templates. A request with alternatives (firstAvailable) counts its first.
// Claims it cannot read are left out.
func (s *Snapshot) DeviceDemands(pod *apiv1.Pod) []DeviceDemand {
	byClass := map[string]*DeviceDemand{}
	for _, pc := range pod.Spec.ResourceClaims {
		spec := s.claimSpec(pod, pc)
		if spec == nil {
			continue
		}
		for _, r := range spec.Devices.Requests {
			class, count, all := requestDemand(r)
			if class == "" {
				continue
			}
			d := byClass[class]
			if d == nil {
				d = &DeviceDemand{Class: class}
				byClass[class] = d
			}
			d.Count += count
			d.All = d.All || all
		}
	}
	out := make([]DeviceDemand, 0, len(byClass))
	for _, class := range slices.Sorted(maps.Keys(byClass)) {
		out = append(out, *byClass[class])
	}
	return out
}

// claimSpec is the spec of pod's claim pc, nil when it cannot be read.
func (s *Snapshot) claimSpec(pod *apiv1.Pod, pc apiv1.PodResourceClaim) *resourceapi.ResourceClaimSpec {
	name := claimNameOf(pod, pc)
	if name == "" && pc.ResourceClaimTemplateName != nil {
		name = simClaimName(pod, pc.Name)
	}
	if c, ok := s.dra.claims[claimKey{pod.Namespace, name}]; ok {
		return &c.Spec
	}
	if pc.ResourceClaimTemplateName == nil || s.dra.source == nil {
		return nil
	}
	tmpl, err := s.dra.source.ResourceClaimTemplate(pod.Namespace, *pc.ResourceClaimTemplateName)
	if err != nil {
		return nil
	}
	return &tmpl.Spec.Spec
}

func requestDemand(r resourceapi.DeviceRequest) (class string, count int64, all bool) {
	if e := r.Exactly; e != nil {
		return e.DeviceClassName, max(e.Count, 1), e.AllocationMode == resourceapi.DeviceAllocationModeAll
	}
	if len(r.FirstAvailable) > 0 {
		sr := r.FirstAvailable[0]
		return sr.DeviceClassName, max(sr.Count, 1), sr.AllocationMode == resourceapi.DeviceAllocationModeAll
	}
	return "", 0, false
}

// DemandsString joins demands for a message: "8 devices of class a and 1
// device of class b".
func DemandsString(demands []DeviceDemand) string {
	parts := make([]string, len(demands))
	for i, d := range demands {
		parts[i] = d.String()
	}
	return strings.Join(parts, " and ")
}
