package template

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/taints"
)

const (
	toBeDeletedTaint         = "ToBeDeletedByClusterAutoscaler"
	deletionCandidateTaint   = "DeletionCandidateOfClusterAutoscaler"
	mirrorPodAnnotation      = "kubernetes.io/config.mirror"
	daemonSetPodAnnotation   = "cluster-autoscaler.kubernetes.io/daemonset-pod"
	templateNodeNameTemplate = "template-node-for-%s"
)

// conditionTaints are set by the node lifecycle and cloud controllers while a
// node is in a transient state; a new node will not have them.
var conditionTaints = map[string]bool{
	apiv1.TaintNodeNotReady:                          true,
	apiv1.TaintNodeUnreachable:                       true,
	apiv1.TaintNodeUnschedulable:                     true,
	apiv1.TaintNodeMemoryPressure:                    true,
	apiv1.TaintNodeDiskPressure:                      true,
	apiv1.TaintNodePIDPressure:                       true,
	apiv1.TaintNodeNetworkUnavailable:                true,
	apiv1.TaintNodeOutOfService:                      true,
	"node.cloudprovider.kubernetes.io/uninitialized": true,
	"node.cloudprovider.kubernetes.io/shutdown":      true,
	"cloud.google.com/impending-node-termination":    true,
	"NodeWithImpairedVolumes":                        true,
	toBeDeletedTaint:                                 true,
	deletionCandidateTaint:                           true,
	taints.Disruption:                                true,
	taints.ConsolidationCandidate:                    true,
}

// Sanitizer turns nodes into templates. Its extra keys come from
// --startup-taint, --startup-taint-prefix, --status-taint and --ignore-taint.
type Sanitizer struct {
	DropTaints        []string
	DropTaintPrefixes []string
	// ForceDaemonSets (--force-ds) puts every missing DaemonSet pod that
	// would run on a template made from a real node on it, whether or not
	// it fits there, so that a group too small for its DaemonSets gets no
	// scale-up; without it only the missing ones that fit are added.
	ForceDaemonSets bool
	// ScaleFromUnschedulable (--scale-from-unschedulable) ignores
	// spec.unschedulable of provider templates; without it a group whose
	// template is unschedulable is not scaled up, as upstream.
	ScaleFromUnschedulable bool
}

// FromNode builds group's template from one of its real nodes: a copy under a
// new name with no provider ID, ready and schedulable, without the taints a
// new node would not have, carrying the node's DaemonSet and static (mirror)
// pods plus the pods of daemonSets that would run there and are missing.
func (s Sanitizer) FromNode(group string, node *apiv1.Node, podsOnNode []*apiv1.Pod, daemonSets []*appsv1.DaemonSet) *cloudprovider.NodeInfo {
	name := fmt.Sprintf(templateNodeNameTemplate, group)
	n := node.DeepCopy()
	n.ObjectMeta = metav1.ObjectMeta{Name: name, UID: types.UID(name), Labels: n.Labels, Annotations: n.Annotations}
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels[apiv1.LabelHostname] = name
	n.Spec.ProviderID = ""
	n.Spec.Unschedulable = false
	n.Spec.Taints = s.keptTaints(n.Spec.Taints)
	n.Status.Conditions = []apiv1.NodeCondition{{Type: apiv1.NodeReady, Status: apiv1.ConditionTrue}}
	n.Status.Addresses = nil
	n.Status.Images = nil
	n.Status.VolumesInUse, n.Status.VolumesAttached = nil, nil

	info := &cloudprovider.NodeInfo{Node: n}
	present := map[types.UID]bool{}
	for _, p := range podsOnNode {
		if p.Status.Phase == apiv1.PodSucceeded || p.Status.Phase == apiv1.PodFailed {
			continue
		}
		ds := daemonSetOwner(p)
		if ds == "" && !isMirror(p) {
			continue
		}
		if ds != "" {
			present[ds] = true
		}
		info.Pods = append(info.Pods, p.DeepCopy())
	}
	for _, ds := range daemonSets {
		if present[ds.UID] || !WouldRunOn(ds, n) {
			continue
		}
		pod := PodForDaemonSet(ds, n.Name)
		if !s.ForceDaemonSets && !fitsBeside(n, info.Pods, pod) {
			continue
		}
		info.Pods = append(info.Pods, pod)
	}
	return info
}

// fitsBeside reports whether pod's requests fit node's allocatable beside
// pods' (each resource pod requests, and the pod count when the node lists
// one).
func fitsBeside(node *apiv1.Node, pods []*apiv1.Pod, pod *apiv1.Pod) bool {
	alloc := node.Status.Allocatable
	if max, ok := alloc[apiv1.ResourcePods]; ok && int64(len(pods)+1) > max.Value() {
		return false
	}
	used := apiv1.ResourceList{}
	for _, p := range pods {
		for name, q := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}) {
			sum := used[name]
			sum.Add(q)
			used[name] = sum
		}
	}
	for name, q := range resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}) {
		if q.IsZero() {
			continue
		}
		sum := used[name]
		sum.Add(q)
		if a, ok := alloc[name]; !ok || sum.Cmp(a) > 0 {
			return false
		}
	}
	return true
}

// AddDaemonSetPods adds to a provider's template the pods of daemonSets
// that would run on it and that it does not list yet.
func AddDaemonSetPods(info *cloudprovider.NodeInfo, daemonSets []*appsv1.DaemonSet) *cloudprovider.NodeInfo {
	present := map[types.UID]bool{}
	for _, p := range info.Pods {
		if ds := daemonSetOwner(p); ds != "" {
			present[ds] = true
		}
	}
	out := &cloudprovider.NodeInfo{Node: info.Node, Pods: append([]*apiv1.Pod(nil), info.Pods...),
		ResourceSlices: info.ResourceSlices}
	for _, ds := range daemonSets {
		if !present[ds.UID] && WouldRunOn(ds, info.Node) {
			out.Pods = append(out.Pods, PodForDaemonSet(ds, info.Node.Name))
		}
	}
	return out
}

// Template returns a provider's template without the taints a new node
// would not keep (start-up, status and ignored taints, node conditions, the
// autoscaler's own): the same taints FromNode drops from copies of real
// nodes. info is not modified; it is returned as is when nothing is dropped.
func (s Sanitizer) Template(info *cloudprovider.NodeInfo) *cloudprovider.NodeInfo {
	if info == nil || info.Node == nil {
		return info
	}
	kept := s.keptTaints(info.Node.Spec.Taints)
	schedulable := s.ScaleFromUnschedulable && info.Node.Spec.Unschedulable
	if len(kept) == len(info.Node.Spec.Taints) && !schedulable {
		return info
	}
	n := info.Node.DeepCopy()
	n.Spec.Taints = kept
	if schedulable {
		n.Spec.Unschedulable = false
	}
	return &cloudprovider.NodeInfo{Node: n, Pods: info.Pods, ResourceSlices: info.ResourceSlices}
}

func (s Sanitizer) keptTaints(taints []apiv1.Taint) []apiv1.Taint {
	var out []apiv1.Taint
	for _, t := range taints {
		if s.drop(t.Key) {
			continue
		}
		out = append(out, t)
	}
	return out
}

func (s Sanitizer) drop(key string) bool {
	if conditionTaints[key] {
		return true
	}
	for _, p := range append([]string{taints.StartupPrefix, taints.IgnorePrefix, taints.StatusPrefix}, s.DropTaintPrefixes...) {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	for _, k := range s.DropTaints {
		if key == k {
			return true
		}
	}
	return false
}

// WouldRunOn reports whether ds places a pod on node: its node selector and
// required node affinity match and the node's NoSchedule/NoExecute taints
// are tolerated.
func WouldRunOn(ds *appsv1.DaemonSet, node *apiv1.Node) bool {
	pod := &apiv1.Pod{Spec: ds.Spec.Template.Spec}
	if ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); err != nil || !ok {
		return false
	}
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Spec.Tolerations,
		func(t *apiv1.Taint) bool {
			return t.Effect == apiv1.TaintEffectNoSchedule || t.Effect == apiv1.TaintEffectNoExecute
		}, true)
	return !untolerated
}

// PodForDaemonSet is the pod ds would run on the node named nodeName.
func PodForDaemonSet(ds *appsv1.DaemonSet, nodeName string) *apiv1.Pod {
	yes := true
	name := fmt.Sprintf("%s-%s", ds.Name, nodeName)
	pod := &apiv1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ds.Namespace, Name: name, UID: types.UID(name),
			Labels: ds.Spec.Template.Labels, Annotations: ds.Spec.Template.Annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name,
				UID: ds.UID, Controller: &yes}}},
		Spec:   *ds.Spec.Template.Spec.DeepCopy(),
		Status: apiv1.PodStatus{Phase: apiv1.PodRunning},
	}
	pod.Spec.NodeName = nodeName
	return pod
}

func daemonSetOwner(p *apiv1.Pod) types.UID {
	for _, o := range p.OwnerReferences {
		if o.Controller != nil && *o.Controller && o.Kind == "DaemonSet" {
			return o.UID
		}
	}
	if p.Annotations[daemonSetPodAnnotation] == "true" {
		return types.UID("annotated/" + p.Namespace + "/" + p.Name)
	}
	return ""
}

func isMirror(p *apiv1.Pod) bool {
	_, ok := p.Annotations[mirrorPodAnnotation]
	return ok
}
