package drain

import (
	"strings"

	apiv1 "k8s.io/api/core/v1"
)

// localStorageRule (only with --skip-nodes-with-local-storage) blocks the node
// of a pod with a local volume whose data would be lost: a hostPath, or an
// emptyDir not backed by memory (LocalStorageRequested). The annotation
// cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes, a comma
// separated list of volume names (blanks around names are ignored), waives
// the volumes it lists: the pod blocks unless it lists every local volume.
type localStorageRule struct{}

func (localStorageRule) check(pod *apiv1.Pod, _ *classifyEnv) outcome {
	if vols := unwaivedLocalVolumes(pod); len(vols) > 0 {
		return blocked(LocalStorageRequested, "pod %s/%s has local volumes %s not listed in %s",
			pod.Namespace, pod.Name, strings.Join(vols, ","), SafeToEvictLocalVolumesAnnotation)
	}
	return outcome{}
}

// unwaivedLocalVolumes names pod's local volumes the annotation does not list.
func unwaivedLocalVolumes(pod *apiv1.Pod) []string {
	waived := map[string]bool{}
	for _, name := range strings.Split(pod.Annotations[SafeToEvictLocalVolumesAnnotation], ",") {
		if name = strings.TrimSpace(name); name != "" {
			waived[name] = true
		}
	}
	var out []string
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if isLocalVolume(v) && !waived[v.Name] {
			out = append(out, v.Name)
		}
	}
	return out
}

func isLocalVolume(v *apiv1.Volume) bool {
	return v.HostPath != nil || (v.EmptyDir != nil && v.EmptyDir.Medium != apiv1.StorageMediumMemory)
}
