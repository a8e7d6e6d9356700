package capacitybuffer

import (
	"fmt"
	"strings"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"

	v1 "k8s.io/autoscaler/cluster-autoscaler/capacitybuffer/apis/autoscaling.x-k8s.io/v1beta1"
)

// PodFromTemplate builds the pod a template describes, in namespace, with
// the one piece of the API server's defaulting that changes what the pod
// asks of a node: a container's request of a resource it only limits is the
// limit. Admission (LimitRanges, webhooks) is not applied; the controller's
// server dry-run is the way to get it.
func PodFromTemplate(namespace string, t *apiv1.PodTemplateSpec) *apiv1.Pod {
	pod := &apiv1.Pod{
		ObjectMeta: *t.ObjectMeta.DeepCopy(),
		Spec:       *t.Spec.DeepCopy(),
	}
	pod.Namespace = namespace
	pod.Spec.NodeName = ""
	for i := range pod.Spec.InitContainers {
		defaultRequests(&pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		defaultRequests(&pod.Spec.Containers[i])
	}
	return pod
}

func defaultRequests(c *apiv1.Container) {
	for name, limit := range c.Resources.Limits {
		if _, ok := c.Resources.Requests[name]; ok {
			continue
		}
		if c.Resources.Requests == nil {
			c.Resources.Requests = apiv1.ResourceList{}
		}
		c.Resources.Requests[name] = limit.DeepCopy()
	}
}

// Requests is what one pod asks of a node, as the scheduler counts it
// (init and sidecar containers, overhead, pod-level resources).
func Requests(pod *apiv1.Pod) apiv1.ResourceList {
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
}

// serviceAccountVolumePrefix starts the name of the token volume the API
// server adds to a pod, with a random suffix.
const serviceAccountVolumePrefix = "kube-api-access-"

// TemplateFromPod is the pod template of a pod as the API server returned
// it (a server dry-run, or a running pod of a scalable object): its labels,
// annotations and spec, without the node it runs on and without the
// service-account token volume, whose random name would change the template
// at every dry-run.
func TemplateFromPod(pod *apiv1.Pod) apiv1.PodTemplateSpec {
	p := pod.DeepCopy()
	p.Spec.NodeName = ""
	p.Spec.Volumes = dropTokenVolumes(p.Spec.Volumes)
	for i := range p.Spec.InitContainers {
		p.Spec.InitContainers[i].VolumeMounts = dropTokenMounts(p.Spec.InitContainers[i].VolumeMounts)
	}
	for i := range p.Spec.Containers {
		p.Spec.Containers[i].VolumeMounts = dropTokenMounts(p.Spec.Containers[i].VolumeMounts)
	}
	return apiv1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: p.Labels, Annotations: p.Annotations}, Spec: p.Spec}
}

func dropTokenVolumes(vs []apiv1.Volume) []apiv1.Volume {
	var out []apiv1.Volume
	for _, v := range vs {
		if !strings.HasPrefix(v.Name, serviceAccountVolumePrefix) {
			out = append(out, v)
		}
	}
	return out
}

func dropTokenMounts(ms []apiv1.VolumeMount) []apiv1.VolumeMount {
	var out []apiv1.VolumeMount
	for _, m := range ms {
		if !strings.HasPrefix(m.Name, serviceAccountVolumePrefix) {
			out = append(out, m)
		}
	}
	return out
}

// Managed PodTemplate names: prefix + buffer name + suffix, as upstream's,
// within an object name's 253 characters.
const (
	managedTemplatePrefix = "capacitybuffer-"
	managedTemplateSuffix = "-pod-template"
	maxObjectName         = 253
)

// ManagedTemplateName is the name of the PodTemplate the controller keeps
// for a buffer whose pod shape it resolves (a scalableRef, or a server
// dry-run).
func ManagedTemplateName(buffer string) string {
	if room := maxObjectName - len(managedTemplatePrefix) - len(managedTemplateSuffix); len(buffer) > room {
		buffer = buffer[:room]
	}
	return managedTemplatePrefix + buffer + managedTemplateSuffix
}

// OwnerReference is the controller reference to b that the pods and
// templates made for it carry.
func OwnerReference(b *v1.CapacityBuffer) metav1.OwnerReference {
	controller := true
	return metav1.OwnerReference{APIVersion: v1.SchemeGroupVersion.String(), Kind: v1.Kind, Name: b.Name,
		UID: b.UID, Controller: &controller}
}

// FakePods builds n pods of b's template for the loop's simulation: marked
// (IsFakePod), owned by b so that they form one equivalence group, named
// capacity-buffer-<buffer>-<i>, with UIDs derived from b's. They are never
// created in the API.
func FakePods(b *v1.CapacityBuffer, t *apiv1.PodTemplateSpec, n int) []*apiv1.Pod {
	if n <= 0 {
		return nil
	}
	sample := PodFromTemplate(b.Namespace, t)
	sample.OwnerReferences = []metav1.OwnerReference{OwnerReference(b)}
	if sample.Annotations == nil {
		sample.Annotations = map[string]string{}
	}
	sample.Annotations[FakePodAnnotation] = FakePodAnnotationValue
	sample.Status = apiv1.PodStatus{Phase: apiv1.PodPending}
	sample.CreationTimestamp = b.CreationTimestamp
	pods := make([]*apiv1.Pod, n)
	for i := range pods {
		p := sample.DeepCopy()
		p.Name = fmt.Sprintf("capacity-buffer-%s-%d", b.Name, i+1)
		p.GenerateName = ""
		p.UID = types.UID(fmt.Sprintf("%s-%d", b.UID, i+1))
		pods[i] = p
	}
	return pods
}
