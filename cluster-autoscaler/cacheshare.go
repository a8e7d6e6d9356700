package main

import (
	"sort"
	"strconv"
	"strings"
	"sync"
	"unique"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podSharer makes cached pods share the parts that the pods of one workload
// have in common, instead of each holding its own decoded copy: containers,
// labels, annotations, owner references, tolerations, node selector,
// affinity, spread constraints, the pod's security context, and the short
// strings (namespace, node, enums). The pods of a ReplicaSet differ only in
// their names, UIDs, node and status; what they share is about half of a
// trimmed pod's memory.
//
// Sharing is safe because cached objects are read-only: nothing may modify a
// pod from an informer (client-go's rule; a copy is made first), and a copy
// (DeepCopy) owns all its parts again. The tables hold at most maxEntries
// values; when full they are emptied and sharing starts anew (pods keep what
// they share).
type podSharer struct {
	mu         sync.Mutex
	maxEntries int
	entries    int
	containers map[string][]apiv1.Container
	stringMaps map[string]map[string]string
	owners     map[string][]metav1.OwnerReference
	tolerate   map[string][]apiv1.Toleration
	spread     map[string][]apiv1.TopologySpreadConstraint
	affinity   map[string]*apiv1.Affinity
	security   map[string]*apiv1.PodSecurityContext
}

func newPodSharer(maxEntries int) *podSharer {
	s := &podSharer{maxEntries: maxEntries}
	s.reset()
	return s
}

func (s *podSharer) reset() {
	s.entries = 0
	s.containers = map[string][]apiv1.Container{}
	s.stringMaps = map[string]map[string]string{}
	s.owners = map[string][]metav1.OwnerReference{}
	s.tolerate = map[string][]apiv1.Toleration{}
	s.spread = map[string][]apiv1.TopologySpreadConstraint{}
	s.affinity = map[string]*apiv1.Affinity{}
	s.security = map[string]*apiv1.PodSecurityContext{}
}

// share replaces the pod's parts by equal ones already cached. The pod must
// be freshly decoded (the informer's transform): its old parts are dropped.
func (s *podSharer) share(pod *apiv1.Pod) {
	keys := podShareKeys(pod)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.entries >= s.maxEntries {
		s.reset()
	}
	pod.Spec.Containers = sharedValue(s, s.containers, keys.containers, pod.Spec.Containers)
	pod.Spec.InitContainers = sharedValue(s, s.containers, keys.initContainers, pod.Spec.InitContainers)
	pod.Labels = sharedValue(s, s.stringMaps, keys.labels, pod.Labels)
	pod.Annotations = sharedValue(s, s.stringMaps, keys.annotations, pod.Annotations)
	pod.Spec.NodeSelector = sharedValue(s, s.stringMaps, keys.nodeSelector, pod.Spec.NodeSelector)
	pod.OwnerReferences = sharedValue(s, s.owners, keys.owners, pod.OwnerReferences)
	pod.Spec.Tolerations = sharedValue(s, s.tolerate, keys.tolerations, pod.Spec.Tolerations)
	pod.Spec.TopologySpreadConstraints = sharedValue(s, s.spread, keys.spread, pod.Spec.TopologySpreadConstraints)
	pod.Spec.Affinity = sharedValue(s, s.affinity, keys.affinity, pod.Spec.Affinity)
	pod.Spec.SecurityContext = sharedValue(s, s.security, keys.security, pod.Spec.SecurityContext)
	internStrings(pod)
}

// sharedValue returns the value already stored under key, or stores v. An
// empty key (the part is absent) keeps v.
func sharedValue[T any](s *podSharer, table map[string]T, key string, v T) T {
	if key == "" {
		return v
	}
	if have, ok := table[key]; ok {
		return have
	}
	table[key] = v
	s.entries++
	return v
}

type shareKeys struct {
	containers, initContainers, labels, annotations, nodeSelector string
	owners, tolerations, spread, affinity, security               string
}

// marshaler is what the API types' generated protobuf code provides.
type marshaler interface{ Marshal() ([]byte, error) }

// podShareKeys computes, outside the lock, a key per part: its protobuf
// encoding (equal encodings, equal values), or "" when the part is absent
// or cannot be encoded.
func podShareKeys(pod *apiv1.Pod) shareKeys {
	return shareKeys{
		containers:     sliceKey(pod.Spec.Containers),
		initContainers: sliceKey(pod.Spec.InitContainers),
		labels:         mapKey("l", pod.Labels),
		annotations:    mapKey("a", pod.Annotations),
		nodeSelector:   mapKey("s", pod.Spec.NodeSelector),
		owners:         sliceKey(pod.OwnerReferences),
		tolerations:    sliceKey(pod.Spec.Tolerations),
		spread:         sliceKey(pod.Spec.TopologySpreadConstraints),
		affinity:       pointerKey(pod.Spec.Affinity),
		security:       pointerKey(pod.Spec.SecurityContext),
	}
}

func sliceKey[T any, P interface {
	*T
	marshaler
}](items []T) string {
	if len(items) == 0 {
		return ""
	}
	var b strings.Builder
	for i := range items {
		data, err := P(&items[i]).Marshal()
		if err != nil {
			return ""
		}
		// A length prefix keeps the elements' boundaries in the key.
		b.WriteString(strconv.Itoa(len(data)))
		b.WriteByte(':')
		b.Write(data)
	}
	return b.String()
}

func pointerKey[T any, P interface {
	*T
	marshaler
}](p P) string {
	if p == nil {
		return ""
	}
	data, err := p.Marshal()
	if err != nil {
		return ""
	}
	return "p" + string(data)
}

// mapKey encodes a string map with a prefix naming its role; the empty map
// (as opposed to an absent one) is shared too.
func mapKey(prefix string, m map[string]string) string {
	if m == nil {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(prefix)
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(m[k])
		b.WriteByte(0)
	}
	return b.String()
}

// internStrings replaces short strings that many pods hold equal by one
// canonical copy (package unique frees it when no pod holds it any more).
func internStrings(pod *apiv1.Pod) {
	in := func(s *string) {
		if *s != "" {
			*s = unique.Make(*s).Value()
		}
	}
	in(&pod.Namespace)
	in(&pod.GenerateName)
	in(&pod.Spec.NodeName)
	in(&pod.Spec.SchedulerName)
	in(&pod.Spec.ServiceAccountName)
	in(&pod.Spec.DeprecatedServiceAccount)
	in(&pod.Spec.PriorityClassName)
	in((*string)(&pod.Spec.RestartPolicy))
	in((*string)(&pod.Spec.DNSPolicy))
	in((*string)(&pod.Status.Phase))
	in((*string)(&pod.Status.QOSClass))
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		in((*string)(&c.Type))
		in((*string)(&c.Status))
		in(&c.Reason)
	}
	for i := range pod.Status.ContainerStatuses {
		in(&pod.Status.ContainerStatuses[i].Name)
	}
}
