package informercache

import (
	"context"
	"reflect"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/clock"
)

// Trimmer is the informers' transform: before an object is cached it
// drops what no part of the autoscaler reads, and makes pods share their
// common parts (podSharer), so that the pods of a large cluster (the bulk of
// the process's memory) take less room.
//
// From every object: metadata.managedFields (server-side apply bookkeeping,
// about a fifth of a small pod as decoded). From pods, in addition:
//   - of each init and app container, what only the kubelet uses: command,
//     args, working directory, environment, volume mounts and devices,
//     probes, lifecycle hooks, termination message settings, image pull
//     policy, security context and the terminal flags. Kept: name, image,
//     ports (host ports are a scheduling constraint), resources, resize
//     policy and restart policy (sidecars count in the pod's requests);
//   - ephemeral containers, which have no resources and are never scheduled;
//   - of each container status, its state, last state, readiness, restart
//     count, image and container IDs, mounts, user and stop signal. Kept: the
//     name and the resources the kubelet reports and allocated (read for
//     pods being resized in place); a status with nothing else is dropped;
//   - the kubelet's readiness conditions (Ready, ContainersReady,
//     Initialized, PodReadyToStartContainers: four of a running pod's five)
//     and the pod's and host's IPs. Kept: PodScheduled (read to find
//     unschedulable and unprocessed pods), the resize conditions (the
//     scheduler's request arithmetic reads PodResizePending) and any other
//     condition type.
//
// Everything else at the pod level (volumes, affinity, tolerations, spread
// constraints, claims, overhead, priority, node name, phase, owner
// references, annotations) is kept. The autoscaler never writes a
// cached pod back to the API server, which would lose what was dropped.
type Trimmer struct {
	pods *podSharer
}

// sharedPartsBytes bounds what the pod sharer remembers: the parts' encoded
// sizes plus partOverhead each (see podSharer).
const sharedPartsBytes = 32 << 20

// NewTrimmer returns the informers' transform, its pod sharer bounded by sharedPartsBytes.
func NewTrimmer() *Trimmer { return &Trimmer{pods: newPodSharer(sharedPartsBytes)} }

// Run keeps the pod sharer to the parts that pods (the pod informer's
// cache) still hold, until ctx ends; see podSharer.
func (t *Trimmer) Run(ctx context.Context, pods CachedPods) {
	t.pods.run(ctx, pods, clock.RealClock{}, sweepPeriod, sweepGap)
}

// Transform is the informers' cache.TransformFunc.
func (t *Trimmer) Transform(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil && m.GetManagedFields() != nil {
		m.SetManagedFields(nil)
	}
	if pod, ok := obj.(*apiv1.Pod); ok {
		trimPod(pod)
		if t.pods != nil {
			t.pods.share(pod)
		}
	}
	return obj, nil
}

func trimPod(pod *apiv1.Pod) {
	for i := range pod.Spec.InitContainers {
		trimContainer(&pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		trimContainer(&pod.Spec.Containers[i])
	}
	pod.Spec.EphemeralContainers = nil
	pod.Status.InitContainerStatuses = trimStatuses(pod.Status.InitContainerStatuses)
	pod.Status.ContainerStatuses = trimStatuses(pod.Status.ContainerStatuses)
	pod.Status.EphemeralContainerStatuses = nil
	pod.Status.Conditions = trimConditions(pod.Status.Conditions)
	pod.Status.PodIP, pod.Status.PodIPs, pod.Status.HostIP, pod.Status.HostIPs = "", nil, "", nil
}

// kubeletReadiness are the condition types only the kubelet's and the
// endpoints' readers need.
var kubeletReadiness = map[apiv1.PodConditionType]bool{
	apiv1.PodReady: true, apiv1.ContainersReady: true, apiv1.PodInitialized: true, apiv1.PodReadyToStartContainers: true,
}

// trimConditions returns the conditions other than kubeletReadiness in a
// slice of their own length (filtering in place would keep the decoded
// backing array, and the memory with it).
func trimConditions(conds []apiv1.PodCondition) []apiv1.PodCondition {
	n := 0
	for i := range conds {
		if !kubeletReadiness[conds[i].Type] {
			n++
		}
	}
	if n == len(conds) {
		return conds
	}
	if n == 0 {
		return nil
	}
	kept := make([]apiv1.PodCondition, 0, n)
	for i := range conds {
		if !kubeletReadiness[conds[i].Type] {
			kept = append(kept, conds[i])
		}
	}
	return kept
}

// trimContainer clears the fields named above; any other field, including
// one a later API version adds, is kept.
func trimContainer(c *apiv1.Container) {
	c.Command, c.Args, c.WorkingDir = nil, nil, ""
	c.Env, c.EnvFrom = nil, nil
	c.VolumeMounts, c.VolumeDevices = nil, nil
	c.LivenessProbe, c.ReadinessProbe, c.StartupProbe, c.Lifecycle = nil, nil, nil, nil
	c.TerminationMessagePath, c.TerminationMessagePolicy, c.ImagePullPolicy = "", "", ""
	c.SecurityContext = nil
	c.Stdin, c.StdinOnce, c.TTY = false, false, false
}

// trimStatuses clears what the kubelet reports of each container's run;
// the name and the resources stay, as does any field not named here. A
// status left with its name only (no resources reported: no resize to
// account for) is dropped, as the scheduler then reads the spec alone.
func trimStatuses(statuses []apiv1.ContainerStatus) []apiv1.ContainerStatus {
	kept := statuses[:0]
	for i := range statuses {
		s := statuses[i]
		s.State, s.LastTerminationState = apiv1.ContainerState{}, apiv1.ContainerState{}
		s.Ready, s.Started, s.RestartCount = false, nil, 0
		s.Image, s.ImageID, s.ContainerID = "", "", ""
		s.VolumeMounts, s.User, s.AllocatedResourcesStatus, s.StopSignal = nil, nil, nil, nil
		if reflect.DeepEqual(s, apiv1.ContainerStatus{Name: s.Name}) {
			continue
		}
		kept = append(kept, s)
	}
	if len(kept) == 0 {
		return nil
	}
	return kept
}
