package drain

import (
	"time"

	apiv1 "k8s.io/api/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
)

// systemPodRule (only with --skip-nodes-with-system-pods) blocks the node of a
// kube-system pod that no PodDisruptionBudget selects (UnmovableKubeSystemPod),
// until the pod is timeout old (--blocking-system-pod-distruption-timeout,
// measured from the pod's creation); a pod with no creation timestamp is
// taken as new. Coverage does not depend on the budget left: the PDB rule
// judges that. The PDBs come from the Classify call's budget when there is
// one, else from pdbLister; with neither, no PDB covers the pod.
type systemPodRule struct {
	timeout   time.Duration
	pdbLister policylisters.PodDisruptionBudgetLister
}

func (r systemPodRule) check(pod *apiv1.Pod, env *classifyEnv) outcome {
	if pod.Namespace != kubeSystemNamespace {
		return outcome{}
	}
	covered, err := r.covered(pod, env)
	if err != nil {
		return blocked(UnexpectedError, "matching kube-system pod %s to pod disruption budgets: %v", pod.Name, err)
	}
	if covered {
		return outcome{}
	}
	created := pod.CreationTimestamp.Time
	if !created.IsZero() && !env.now.Before(created.Add(r.timeout)) {
		return outcome{}
	}
	return blocked(UnmovableKubeSystemPod, "kube-system pod %s has no PodDisruptionBudget and is younger than %s",
		pod.Name, r.timeout)
}

func (r systemPodRule) covered(pod *apiv1.Pod, env *classifyEnv) (bool, error) {
	if env.pdbs != nil {
		idx, err := env.pdbs.matching(pod)
		return len(idx) > 0, err
	}
	if r.pdbLister == nil {
		return false, nil
	}
	return listerCovers(r.pdbLister, pod)
}
