package estimator

import (
	"encoding/json"
	"hash/fnv"
	"io"
	"sort"
	"strconv"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Group is a set of equivalent pending pods: any of them could take the
// place of any other in a simulation.
type Group struct {
	// Pods are the members; Pods[0] stands for all of them.
	Pods []*apiv1.Pod
	// Interacting is true when the pods constrain each other's placement
	// (inter-pod affinity or anti-affinity, topology spread, host ports), so
	// that they must be placed one at a time.
	Interacting bool
}

// Representative is the pod that stands for the group.
func (g *Group) Representative() *apiv1.Pod { return g.Pods[0] }

type groupKey struct {
	owner types.UID
	spec  uint64
}

// GroupPods splits pods into equivalence groups, in order of first
// appearance. Pods without a controller each form their own group.
func GroupPods(pods []*apiv1.Pod) []*Group {
	index := make(map[groupKey]*Group)
	var out []*Group
	for _, p := range pods {
		key := groupKey{spec: specHash(p)}
		if ref := metav1.GetControllerOf(p); ref != nil {
			key.owner = ref.UID
		} else {
			key.owner = "pod:" + p.UID
		}
		g, ok := index[key]
		if !ok {
			g = &Group{Interacting: interacting(p)}
			index[key] = g
			out = append(out, g)
		}
		g.Pods = append(g.Pods, p)
	}
	return out
}

// interacting reports whether pods like p constrain each other.
func interacting(p *apiv1.Pod) bool {
	if a := p.Spec.Affinity; a != nil && (a.PodAffinity != nil || a.PodAntiAffinity != nil) {
		return true
	}
	if len(p.Spec.TopologySpreadConstraints) > 0 {
		return true
	}
	for _, c := range p.Spec.Containers {
		for _, port := range c.Ports {
			if port.HostPort != 0 {
				return true
			}
		}
	}
	return false
}

// specHash digests what the scheduler's Filter plugins read of a pod. Plain
// fields are written directly; the rarely set structured ones (affinity,
// spread constraints, volumes, claims) through JSON.
func specHash(p *apiv1.Pod) uint64 {
	h := fnv.New64a()
	w := func(s string) { _, _ = io.WriteString(h, s); _, _ = h.Write([]byte{0}) }
	writeResources := func(rs apiv1.ResourceRequirements) {
		for _, rl := range []apiv1.ResourceList{rs.Requests, rs.Limits} {
			names := make([]string, 0, len(rl))
			for n := range rl {
				names = append(names, string(n))
			}
			sort.Strings(names)
			for _, n := range names {
				q := rl[apiv1.ResourceName(n)]
				w(n)
				w(strconv.FormatInt(q.MilliValue(), 10))
			}
			w("|")
		}
	}
	w(p.Namespace)
	w(p.Spec.SchedulerName)
	w(p.Spec.PriorityClassName)
	if p.Spec.Priority != nil {
		w(strconv.Itoa(int(*p.Spec.Priority)))
	}
	for _, cs := range [][]apiv1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			writeResources(c.Resources)
			for _, port := range c.Ports {
				w(strconv.Itoa(int(port.HostPort)))
				w(string(port.Protocol))
				w(port.HostIP)
			}
			if c.RestartPolicy != nil {
				w(string(*c.RestartPolicy))
			}
		}
		w("#")
	}
	if p.Spec.Resources != nil {
		writeResources(*p.Spec.Resources)
	}
	writeSortedMap(w, p.Spec.NodeSelector)
	writeSortedMap(w, p.Labels)
	for _, o := range p.Spec.Overhead {
		w(strconv.FormatInt(o.MilliValue(), 10))
	}
	for _, t := range p.Spec.Tolerations {
		w(t.Key)
		w(string(t.Operator))
		w(t.Value)
		w(string(t.Effect))
	}
	for _, v := range []any{p.Spec.Affinity, p.Spec.TopologySpreadConstraints, volumesOfInterest(p), p.Spec.ResourceClaims} {
		if b, err := json.Marshal(v); err == nil {
			_, _ = h.Write(b)
		}
	}
	return h.Sum64()
}

func writeSortedMap(w func(string), m map[string]string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		w(k)
		w(m[k])
	}
	w("}")
}

// volumesOfInterest keeps the volumes that constrain placement: claims,
// ephemeral volumes and host paths.
func volumesOfInterest(p *apiv1.Pod) []apiv1.Volume {
	var out []apiv1.Volume
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil || v.HostPath != nil {
			out = append(out, v)
		}
	}
	return out
}
