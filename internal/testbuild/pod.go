package testbuild

import (
	"fmt"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// UID is the UID the builders give an object of this name ("uid-<name>"),
// also in the owner references they write, so an owner built elsewhere
// matches when it uses UID too.
func UID(name string) types.UID { return types.UID("uid-" + name) }

// PodBuilder builds a Pod; each method changes it and returns the builder.
type PodBuilder struct{ p *apiv1.Pod }

// Pod starts a pod in namespace "default" with UID(name), empty label and
// annotation maps and one container "c" without requests.
func Pod(name string) *PodBuilder {
	return &PodBuilder{&apiv1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: UID(name),
			Labels: map[string]string{}, Annotations: map[string]string{}},
		Spec: apiv1.PodSpec{Containers: []apiv1.Container{{Name: "c"}}},
	}}
}

// Pods returns n pods named <prefix>-<i>, each started by Pod and passed to
// each of with (for example func(b *PodBuilder) { b.Req("1", "") }).
func Pods(prefix string, n int, with ...func(*PodBuilder)) []*apiv1.Pod {
	out := make([]*apiv1.Pod, n)
	for i := range out {
		b := Pod(fmt.Sprintf("%s-%d", prefix, i))
		for _, w := range with {
			w(b)
		}
		out[i] = b.Obj()
	}
	return out
}

// Obj returns the pod.
func (b *PodBuilder) Obj() *apiv1.Pod { return b.p }

// Namespace moves the pod to namespace ns.
func (b *PodBuilder) Namespace(ns string) *PodBuilder { b.p.Namespace = ns; return b }

// Label sets a label.
func (b *PodBuilder) Label(k, v string) *PodBuilder { b.p.Labels[k] = v; return b }

// Annotate sets an annotation.
func (b *PodBuilder) Annotate(k, v string) *PodBuilder { b.p.Annotations[k] = v; return b }

// On binds the pod to node (spec.nodeName).
func (b *PodBuilder) On(node string) *PodBuilder { b.p.Spec.NodeName = node; return b }

// Phase sets status.phase.
func (b *PodBuilder) Phase(ph apiv1.PodPhase) *PodBuilder { b.p.Status.Phase = ph; return b }

// Created sets the creation timestamp.
func (b *PodBuilder) Created(at time.Time) *PodBuilder {
	b.p.CreationTimestamp = metav1.NewTime(at)
	return b
}

// Deleted sets the deletion timestamp.
func (b *PodBuilder) Deleted(at time.Time) *PodBuilder {
	ts := metav1.NewTime(at)
	b.p.DeletionTimestamp = &ts
	return b
}

// Grace sets terminationGracePeriodSeconds.
func (b *PodBuilder) Grace(sec int64) *PodBuilder {
	b.p.Spec.TerminationGracePeriodSeconds = ptr.To(sec)
	return b
}

// Resources is a ResourceList of cpu and memory; an empty string leaves that
// resource out.
func Resources(cpu, memory string) apiv1.ResourceList {
	rl := apiv1.ResourceList{}
	if cpu != "" {
		rl[apiv1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		rl[apiv1.ResourceMemory] = resource.MustParse(memory)
	}
	return rl
}

// Req sets the first container's requests (an empty string: none of it).
func (b *PodBuilder) Req(cpu, memory string) *PodBuilder {
	b.p.Spec.Containers[0].Resources.Requests = Resources(cpu, memory)
	return b
}

// Container adds a regular container with these requests.
func (b *PodBuilder) Container(cpu, memory string) *PodBuilder {
	name := "c" + string(rune('a'+len(b.p.Spec.Containers)))
	b.p.Spec.Containers = append(b.p.Spec.Containers,
		apiv1.Container{Name: name, Resources: apiv1.ResourceRequirements{Requests: Resources(cpu, memory)}})
	return b
}

// InitContainer adds an init container; sidecar makes it restartable.
func (b *PodBuilder) InitContainer(cpu, memory string, sidecar bool) *PodBuilder {
	c := apiv1.Container{Name: "i", Resources: apiv1.ResourceRequirements{Requests: Resources(cpu, memory)}}
	if sidecar {
		c.RestartPolicy = ptr.To(apiv1.ContainerRestartPolicyAlways)
	}
	b.p.Spec.InitContainers = append(b.p.Spec.InitContainers, c)
	return b
}

// Overhead sets the pod overhead.
func (b *PodBuilder) Overhead(cpu, memory string) *PodBuilder {
	b.p.Spec.Overhead = Resources(cpu, memory)
	return b
}

// GPU sets the first container's nvidia.com/gpu limit.
func (b *PodBuilder) GPU(n string) *PodBuilder {
	b.p.Spec.Containers[0].Resources.Limits = apiv1.ResourceList{"nvidia.com/gpu": resource.MustParse(n)}
	return b
}

// Selector sets the node selector to the one pair k=v.
func (b *PodBuilder) Selector(k, v string) *PodBuilder {
	b.p.Spec.NodeSelector = map[string]string{k: v}
	return b
}

// Tolerate adds a toleration of any taint with key k.
func (b *PodBuilder) Tolerate(k string) *PodBuilder {
	b.p.Spec.Tolerations = append(b.p.Spec.Tolerations, apiv1.Toleration{Key: k, Operator: apiv1.TolerationOpExists})
	return b
}

// HostPort makes the first container take TCP port on the host.
func (b *PodBuilder) HostPort(port int32) *PodBuilder {
	b.p.Spec.Containers[0].Ports = []apiv1.ContainerPort{{ContainerPort: port, HostPort: port, Protocol: apiv1.ProtocolTCP}}
	return b
}

// AntiAffinity keeps the pod off nodes (by hostname) running a pod labelled k=v.
func (b *PodBuilder) AntiAffinity(k, v string) *PodBuilder {
	b.p.Spec.Affinity = &apiv1.Affinity{PodAntiAffinity: &apiv1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []apiv1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{k: v}},
			TopologyKey:   apiv1.LabelHostname,
		}}}}
	return b
}

// Owner adds a controller reference to name, with UID(name).
func (b *PodBuilder) Owner(apiVersion, kind, name string) *PodBuilder {
	b.p.OwnerReferences = append(b.p.OwnerReferences, metav1.OwnerReference{
		APIVersion: apiVersion, Kind: kind, Name: name, UID: UID(name), Controller: ptr.To(true),
	})
	return b
}

// ReplicaSet makes ReplicaSet name the pod's controller.
func (b *PodBuilder) ReplicaSet(name string) *PodBuilder {
	return b.Owner("apps/v1", "ReplicaSet", name)
}

// DaemonSet makes DaemonSet name the pod's controller.
func (b *PodBuilder) DaemonSet(name string) *PodBuilder { return b.Owner("apps/v1", "DaemonSet", name) }

// Volume adds a volume.
func (b *PodBuilder) Volume(name string, src apiv1.VolumeSource) *PodBuilder {
	b.p.Spec.Volumes = append(b.p.Spec.Volumes, apiv1.Volume{Name: name, VolumeSource: src})
	return b
}

// HostPath adds a hostPath volume vol (path /var/<vol>).
func (b *PodBuilder) HostPath(vol string) *PodBuilder {
	return b.Volume(vol, apiv1.VolumeSource{HostPath: &apiv1.HostPathVolumeSource{Path: "/var/" + vol}})
}

// EmptyDir adds an emptyDir volume vol of medium.
func (b *PodBuilder) EmptyDir(vol string, medium apiv1.StorageMedium) *PodBuilder {
	return b.Volume(vol, apiv1.VolumeSource{EmptyDir: &apiv1.EmptyDirVolumeSource{Medium: medium}})
}

// ConfigMap adds a configMap volume vol.
func (b *PodBuilder) ConfigMap(vol string) *PodBuilder {
	return b.Volume(vol, apiv1.VolumeSource{ConfigMap: &apiv1.ConfigMapVolumeSource{}})
}

// Claim adds a volume "v-<claim>" of PersistentVolumeClaim claim.
func (b *PodBuilder) Claim(claim string) *PodBuilder {
	return b.Volume("v-"+claim, apiv1.VolumeSource{
		PersistentVolumeClaim: &apiv1.PersistentVolumeClaimVolumeSource{ClaimName: claim}})
}
