package framework

import (
	"fmt"
	"hash/fnv"
	"strings"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
)

// DRASource gives the snapshot the cluster's Dynamic Resource Allocation
// objects (resource.k8s.io/v1) at each Reset; informer listers back it.
type DRASource interface {
	ResourceSlices() ([]*resourceapi.ResourceSlice, error)
	ResourceClaims() ([]*resourceapi.ResourceClaim, error)
	DeviceClasses() ([]*resourceapi.DeviceClass, error)
	// ResourceClaimTemplate returns the template, or an error when there is none.
	ResourceClaimTemplate(namespace, name string) (*resourceapi.ResourceClaimTemplate, error)
}

// draObjects is the snapshot's DRA state. The cluster's objects are shared
// with the informers and never modified: a change (an allocation, a claim
// created from a template, a simulated node's slices) replaces the pointer
// in the snapshot's own maps and records how to undo it.
type draObjects struct {
	source DRASource

	slices     []*resourceapi.ResourceSlice            // the cluster's
	byNode     map[string][]*resourceapi.ResourceSlice // the cluster's node-local slices, by node
	nodeSlices map[string][]*resourceapi.ResourceSlice // simulated nodes' own (SetResourceSlices)
	claims     map[claimKey]*resourceapi.ResourceClaim
	classes    map[string]*resourceapi.DeviceClass

	// bind allocates and reserves the claims of pod on node before the
	// snapshot places it there; the Handle sets it (nil: claims are not
	// touched, as for a snapshot used without a Handle).
	bind func(pod *apiv1.Pod, node string) error

	// allocated caches the devices allocated claims hold (DeviceUsage);
	// nil after any change of a claim.
	allocated sets.Set[structured.DeviceID]
}

type claimKey struct{ namespace, name string }

func keyOf(c *resourceapi.ResourceClaim) claimKey { return claimKey{c.Namespace, c.Name} }

// load fills d from its source; without one d is empty.
func (d *draObjects) load() error {
	d.slices, d.byNode, d.nodeSlices = nil, map[string][]*resourceapi.ResourceSlice{}, map[string][]*resourceapi.ResourceSlice{}
	d.claims, d.classes = map[claimKey]*resourceapi.ResourceClaim{}, map[string]*resourceapi.DeviceClass{}
	if d.source == nil {
		return nil
	}
	slices, err := d.source.ResourceSlices()
	if err != nil {
		return fmt.Errorf("listing ResourceSlices: %w", err)
	}
	claims, err := d.source.ResourceClaims()
	if err != nil {
		return fmt.Errorf("listing ResourceClaims: %w", err)
	}
	classes, err := d.source.DeviceClasses()
	if err != nil {
		return fmt.Errorf("listing DeviceClasses: %w", err)
	}
	d.slices = slices
	for _, sl := range slices {
		if sl.Spec.NodeName != nil {
			d.byNode[*sl.Spec.NodeName] = append(d.byNode[*sl.Spec.NodeName], sl)
		}
	}
	for _, c := range claims {
		d.claims[keyOf(c)] = c
	}
	for _, c := range classes {
		d.classes[c.Name] = c
	}
	return nil
}

// SetResourceSlices gives simulated node name the ResourceSlices its DRA
// drivers would publish (a template's, see RenamedResourceSlices); nil
// removes them. Like every change it is undone by Revert.
func (s *Snapshot) SetResourceSlices(name string, slices []*resourceapi.ResourceSlice) {
	old, had := s.dra.nodeSlices[name]
	if len(s.markers) > 0 {
		s.undo = append(s.undo, undoEntry{kind: undoSlices, name: name, slices: old, hadSlices: had})
	}
	s.setSlices(name, slices, slices != nil)
}

func (s *Snapshot) setSlices(name string, slices []*resourceapi.ResourceSlice, present bool) {
	if present {
		s.dra.nodeSlices[name] = slices
	} else {
		delete(s.dra.nodeSlices, name)
	}
}

// ResourceSlices returns the slices node name publishes in the snapshot:
// its own (SetResourceSlices) if it has any, else the cluster's.
func (s *Snapshot) ResourceSlices(name string) []*resourceapi.ResourceSlice {
	if own, ok := s.dra.nodeSlices[name]; ok {
		return own
	}
	return s.dra.byNode[name]
}

// SourceResourceSlices lists, by node, the node-local ResourceSlices the
// DRA source holds now (the informers' current view), whereas
// ResourceSlices answers from the last Reset and knows none before the
// first. It is nil without a source.
func (s *Snapshot) SourceResourceSlices() (map[string][]*resourceapi.ResourceSlice, error) {
	if s.dra.source == nil {
		return nil, nil
	}
	slices, err := s.dra.source.ResourceSlices()
	if err != nil {
		return nil, fmt.Errorf("listing ResourceSlices: %w", err)
	}
	out := map[string][]*resourceapi.ResourceSlice{}
	for _, sl := range slices {
		if sl.Spec.NodeName != nil {
			out[*sl.Spec.NodeName] = append(out[*sl.Spec.NodeName], sl)
		}
	}
	return out, nil
}

// allSlices lists the cluster's slices and the simulated nodes' own; a node
// with its own slices hides the cluster's of the same node name.
func (s *Snapshot) allSlices() []*resourceapi.ResourceSlice {
	out := make([]*resourceapi.ResourceSlice, 0, len(s.dra.slices))
	for _, sl := range s.dra.slices {
		if sl.Spec.NodeName != nil {
			if _, own := s.dra.nodeSlices[*sl.Spec.NodeName]; own {
				continue
			}
		}
		out = append(out, sl)
	}
	for _, own := range s.dra.nodeSlices {
		out = append(out, own...)
	}
	return out
}

// Claim returns the snapshot's copy of a ResourceClaim: with the allocation
// and reservations the simulation made.
func (s *Snapshot) Claim(namespace, name string) (*resourceapi.ResourceClaim, bool) {
	c, ok := s.dra.claims[claimKey{namespace, name}]
	return c, ok
}

// putClaim stores c (a new object, never one the informers hold) in place
// of the claim of the same name, recording how to undo it.
func (s *Snapshot) putClaim(c *resourceapi.ResourceClaim) {
	k := keyOf(c)
	old, had := s.dra.claims[k]
	if len(s.markers) > 0 {
		s.undo = append(s.undo, undoEntry{kind: undoClaim, claim: k, oldClaim: old, hadClaim: had})
	}
	s.dra.claims[k] = c
	s.dra.allocated = nil
}

func (s *Snapshot) restoreClaim(k claimKey, old *resourceapi.ResourceClaim, had bool) {
	s.dra.allocated = nil
	if had {
		s.dra.claims[k] = old
	} else {
		delete(s.dra.claims, k)
	}
}

// podWithClaims returns pod as the DynamicResources plugin must see it:
// every claim made from a template named in its status. A claim the
// resourceclaim controller has not created yet is created in the snapshot,
// from the template, under the name simClaimName gives it; the pod returned
// is then a copy whose status names it. A pod whose claims all exist is
// returned as it is.
func (s *Snapshot) podWithClaims(pod *apiv1.Pod) (*apiv1.Pod, error) {
	var add []apiv1.PodResourceClaimStatus
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		if pc.ResourceClaimTemplateName == nil || hasClaimStatus(pod, pc.Name) {
			continue
		}
		name := simClaimName(pod, pc.Name)
		if _, ok := s.dra.claims[claimKey{pod.Namespace, name}]; !ok {
			if s.dra.source == nil {
				return nil, fmt.Errorf("claim %q: ResourceClaimTemplate %s/%s: resource.k8s.io is not watched",
					pc.Name, pod.Namespace, *pc.ResourceClaimTemplateName)
			}
			tmpl, err := s.dra.source.ResourceClaimTemplate(pod.Namespace, *pc.ResourceClaimTemplateName)
			if err != nil {
				return nil, fmt.Errorf("claim %q: %w", pc.Name, err)
			}
			s.putClaim(claimFromTemplate(pod, pc.Name, name, tmpl))
		}
		add = append(add, apiv1.PodResourceClaimStatus{Name: pc.Name, ResourceClaimName: &name})
	}
	if len(add) == 0 {
		return pod, nil
	}
	cp := *pod
	cp.Status.ResourceClaimStatuses = append(append([]apiv1.PodResourceClaimStatus(nil),
		pod.Status.ResourceClaimStatuses...), add...)
	return &cp, nil
}

func hasClaimStatus(pod *apiv1.Pod, claim string) bool {
	for _, st := range pod.Status.ResourceClaimStatuses {
		if st.Name == claim {
			return true
		}
	}
	return false
}

// simClaimName names the claim of pod's template claim podClaim as the
// resourceclaim controller does (pod name, claim name, a suffix), with a
// suffix derived from the pod instead of a random one, so that every
// question about the same pod finds the same claim.
func simClaimName(pod *apiv1.Pod, podClaim string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(string(pod.UID) + "/" + pod.Namespace + "/" + pod.Name + "/" + podClaim))
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	sum, suffix := h.Sum32(), make([]byte, 5)
	for i := range suffix {
		suffix[i] = alphabet[sum%uint32(len(alphabet))]
		sum /= uint32(len(alphabet))
	}
	return truncate(pod.Name, 28) + "-" + truncate(podClaim, 28) + "-" + string(suffix)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// claimFromTemplate is the claim the resourceclaim controller would create
// for pod's claim podClaim: the template's spec, owned by the pod.
func claimFromTemplate(pod *apiv1.Pod, podClaim, name string, tmpl *resourceapi.ResourceClaimTemplate) *resourceapi.ResourceClaim {
	yes := true
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: pod.Namespace,
			Labels: tmpl.Spec.Labels, Annotations: map[string]string{"resource.kubernetes.io/pod-claim-name": podClaim},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
				Controller: &yes, BlockOwnerDeletion: &yes}},
		},
		Spec: *tmpl.Spec.Spec.DeepCopy(),
	}
}

// reserveFor adds pod to the ReservedFor list of claim (in a copy), as the
// scheduler's PreBind does once the claim is allocated.
func (s *Snapshot) reserveFor(c *resourceapi.ResourceClaim, pod *apiv1.Pod) {
	for _, r := range c.Status.ReservedFor {
		if r.Resource == "pods" && r.Name == pod.Name && r.UID == pod.UID {
			return
		}
	}
	cp := c.DeepCopy()
	cp.Status.ReservedFor = append(cp.Status.ReservedFor,
		resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: pod.Name, UID: pod.UID})
	s.putClaim(cp)
}

// RenamedResourceSlices returns copies of slices that node from publishes,
// as node to would publish them: bound to node to, with pools (and slice
// names) renamed so that devices of the copies and of the original never
// share an identity.
func RenamedResourceSlices(slices []*resourceapi.ResourceSlice, from, to string) []*resourceapi.ResourceSlice {
	out := make([]*resourceapi.ResourceSlice, 0, len(slices))
	for _, sl := range slices {
		cp := sl.DeepCopy()
		cp.Name = renamed(sl.Name, from, to)
		cp.UID, cp.ResourceVersion = "", ""
		cp.Spec.Pool.Name = renamed(sl.Spec.Pool.Name, from, to)
		if cp.Spec.NodeName != nil {
			cp.Spec.NodeName = &to
		}
		out = append(out, cp)
	}
	return out
}

func renamed(name, from, to string) string {
	if from != "" && strings.Contains(name, from) {
		return strings.ReplaceAll(name, from, to)
	}
	return name + "-" + to
}
