package framework

import (
	"fmt"
	"slices"
	"sort"

	apiv1 "k8s.io/api/core/v1"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
)

// podLocalPlugins are the in-tree PreFilter/Filter plugins whose verdict on a
// node depends only on that node, its pods' resources and ports, and the
// pod's own spec, provided the pod passes PodByPodReason's checks (no
// inter-pod terms, no spread constraints, no volume that the volume plugins
// count or reserve). For such a pod, equivalent pods get the same verdict on
// equal nodes, and one PreFilter result serves them all.
var podLocalPlugins = map[string]bool{
	names.NodeUnschedulable:    true,
	names.NodeName:             true,
	names.TaintToleration:      true,
	names.NodeAffinity:         true,
	names.NodePorts:            true, // host ports make a pod interacting (checked below)
	names.NodeResourcesFit:     true,
	names.NodeDeclaredFeatures: true,
	names.VolumeRestrictions:   true, // skipped for pods without restricted volumes (checked below)
	names.NodeVolumeLimits:     true, // skipped for pods without attachable volumes (checked below)
	names.VolumeBinding:        true, // skipped for pods without claims (checked below)
	names.VolumeZone:           true, // skipped for pods without claims (checked below)
	names.PodTopologySpread:    true, // skipped without own or default DoNotSchedule constraints (checked below)
	names.InterPodAffinity:     true, // pods with inter-pod terms are interacting (checked below)
	// Skipped for pods without claims, and without extended resources that
	// a DeviceClass may map to devices (checked below).
	names.DynamicResources: true,
}

// profilePolicy is what PodByPodReason needs to know of the profile.
type profilePolicy struct {
	// nonLocal are the enabled PreFilter/Filter plugins not in podLocalPlugins.
	nonLocal []string
	// defaultSpread is true when PodTopologySpread filters and the profile
	// gives pods without constraints of their own a DoNotSchedule one.
	defaultSpread bool
	// dra is true when DynamicResources filters: it may then serve a pod's
	// extended resources from devices (DRAExtendedResource).
	dra bool
}

// newProfilePolicy reads the enabled PreFilter and Filter plugins of the
// built framework and the PodTopologySpread arguments of the profile.
func newProfilePolicy(enabled *schedconfig.Plugins, profile *schedconfig.KubeSchedulerProfile) profilePolicy {
	var pp profilePolicy
	filters := map[string]bool{}
	if enabled != nil {
		for _, set := range []schedconfig.PluginSet{enabled.PreFilter, enabled.Filter} {
			for _, p := range set.Enabled {
				filters[p.Name] = true
			}
		}
	}
	for name := range filters {
		if !podLocalPlugins[name] {
			pp.nonLocal = append(pp.nonLocal, name)
		}
	}
	sort.Strings(pp.nonLocal)
	pp.dra = filters[names.DynamicResources]
	if !filters[names.PodTopologySpread] {
		return pp
	}
	for _, pc := range profile.PluginConfig {
		args, ok := pc.Args.(*schedconfig.PodTopologySpreadArgs)
		if pc.Name != names.PodTopologySpread || !ok {
			continue
		}
		// The system defaults are ScheduleAnyway: they only score.
		if args.DefaultingType == schedconfig.ListDefaulting {
			pp.defaultSpread = slices.ContainsFunc(args.DefaultConstraints, func(c apiv1.TopologySpreadConstraint) bool {
				return c.WhenUnsatisfiable == apiv1.DoNotSchedule
			})
		}
	}
	return pp
}

// ReadsOtherNodes reports whether the profile's PreFilter and Filter plugins
// may read, for pod, other nodes than the one they are asked about: required
// inter-pod terms and DoNotSchedule spread constraints (the pod's own, or the
// profile's defaults for a labelled pod without any) count pods across a
// topology domain, and a plugin outside podLocalPlugins may read anything.
// Pods already placed matter only through their required anti-affinity
// terms, which the snapshot tells (Snapshot.HasRequiredAntiAffinity).
func (h *Handle) ReadsOtherNodes(pod *apiv1.Pod) bool {
	if len(h.policy.nonLocal) > 0 {
		return true
	}
	if a := pod.Spec.Affinity; a != nil {
		if a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			return true
		}
		if a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			return true
		}
	}
	if len(pod.Spec.TopologySpreadConstraints) == 0 {
		return h.policy.defaultSpread && len(pod.Labels) > 0
	}
	return slices.ContainsFunc(pod.Spec.TopologySpreadConstraints, func(c apiv1.TopologySpreadConstraint) bool {
		return c.WhenUnsatisfiable == apiv1.DoNotSchedule
	})
}

// PodByPodReason says why pods equivalent to pod must be placed one at a
// time, each after asking the plugins about the nodes as the previous ones
// left them; it is empty when every enabled PreFilter and Filter plugin
// provably gives the same verdict for all of them on equal nodes, so that a
// simulation may learn how many fit one node and count nodes arithmetically.
// It is conservative: any plugin, pod field or profile setting it cannot
// vouch for gives a reason.
func (h *Handle) PodByPodReason(pod *apiv1.Pod) string {
	if len(h.policy.nonLocal) > 0 {
		return fmt.Sprintf("the scheduler profile enables plugins %v", h.policy.nonLocal)
	}
	if a := pod.Spec.Affinity; a != nil && (a.PodAffinity != nil || a.PodAntiAffinity != nil) {
		return "inter-pod affinity"
	}
	if len(pod.Spec.TopologySpreadConstraints) > 0 {
		return "topology spread constraints"
	}
	// Default constraints select pods through the Services and controllers
	// whose selectors match their labels: a pod without labels is never
	// selected, every other one may be.
	if h.policy.defaultSpread && len(pod.Labels) > 0 {
		return "default topology spread constraints of the scheduler profile"
	}
	for _, cs := range [][]apiv1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for _, p := range c.Ports {
				if p.HostPort != 0 {
					return "host ports"
				}
			}
		}
	}
	for _, v := range pod.Spec.Volumes {
		if !nodeLocalVolume(v.VolumeSource) {
			return fmt.Sprintf("volume %q is counted, reserved or restricted per node or per cluster", v.Name)
		}
	}
	if len(pod.Spec.ResourceClaims) > 0 {
		return "resource claims"
	}
	if h.policy.dra {
		if name, ok := extendedResource(pod); ok {
			return fmt.Sprintf("extended resource %q, which DRA devices may provide", name)
		}
	}
	return ""
}

// extendedResource names an extended resource the pod requests, if any.
func extendedResource(pod *apiv1.Pod) (apiv1.ResourceName, bool) {
	lists := []apiv1.ResourceList{}
	if pod.Spec.Resources != nil {
		lists = append(lists, pod.Spec.Resources.Requests, pod.Spec.Resources.Limits)
	}
	for _, cs := range [][]apiv1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			lists = append(lists, c.Resources.Requests, c.Resources.Limits)
		}
	}
	for _, l := range lists {
		for name := range l {
			if v1helper.IsExtendedResourceName(name) {
				return name, true
			}
		}
	}
	return "", false
}

// nodeLocalVolume reports whether no volume plugin looks at v: volumes that
// only live on the node, without claims, attach limits or conflicts.
func nodeLocalVolume(v apiv1.VolumeSource) bool {
	return v.EmptyDir != nil || v.ConfigMap != nil || v.Secret != nil || v.DownwardAPI != nil || v.Projected != nil ||
		v.HostPath != nil || v.Image != nil
}
