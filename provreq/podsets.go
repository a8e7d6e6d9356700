package provreq

import (
	"fmt"

	v1 "k8s.io/autoscaler/cluster-autoscaler/provreq/apis/autoscaling.x-k8s.io/v1"
)

// MaxPodSets is the most PodSets a request may have, as the CRD says.
const MaxPodSets = 32

// ValidatePodSets checks what the CRD's schema promises about a request's
// PodSets: 1 to MaxPodSets of them, each naming a PodTemplate and asking
// for at least one pod. The API server enforces it only when the installed
// CRD carries that schema; the autoscaler checks it again, since a count
// below 1 would otherwise let a sum of counts slip under
// --max-pods-per-provisioning-request while another count is huge.
func ValidatePodSets(sets []v1.PodSet) error {
	if len(sets) == 0 || len(sets) > MaxPodSets {
		return fmt.Errorf("%d PodSets: a request has 1 to %d", len(sets), MaxPodSets)
	}
	for i, ps := range sets {
		if ps.PodTemplateRef.Name == "" {
			return fmt.Errorf("PodSet %d names no PodTemplate", i)
		}
		if ps.Count < 1 {
			return fmt.Errorf("PodSet %d asks for %d pods: the count must be at least 1", i, ps.Count)
		}
	}
	return nil
}
