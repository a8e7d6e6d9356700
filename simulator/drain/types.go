package drain

import (
	"time"

	apiv1 "k8s.io/api/core/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
)

// Pod annotations the rules read; the keys are upstream's.
const (
	// SafeToEvictAnnotation is "true" (move, overriding most blocking rules),
	// "false" (blocks) or "on-completion" (blocks until the pod finishes).
	SafeToEvictAnnotation = "cluster-autoscaler.kubernetes.io/safe-to-evict"
	// SafeToEvictLocalVolumesAnnotation lists, comma separated, the local
	// volumes whose data may be lost.
	SafeToEvictLocalVolumesAnnotation = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"
	// DaemonSetPodAnnotation set to "true" marks a pod as a DaemonSet pod
	// whatever its controller.
	DaemonSetPodAnnotation = "cluster-autoscaler.kubernetes.io/daemonset-pod"
	// EnableDSEvictionAnnotation ("true"/"false") overrides, per DaemonSet pod,
	// the --daemonset-eviction-for-*-nodes flags.
	EnableDSEvictionAnnotation = "cluster-autoscaler.kubernetes.io/enable-ds-eviction"
)

// Values of SafeToEvictAnnotation.
const (
	safeToEvictTrue         = "true"
	safeToEvictFalse        = "false"
	safeToEvictOnCompletion = "on-completion"
)

// kubeSystemNamespace is where the system-pod rule looks.
const kubeSystemNamespace = "kube-system"

// BlockingReason says why a pod blocks its node's removal; values are
// upstream's names.
type BlockingReason string

// Blocking reasons.
const (
	// NoReason is the zero value; a BlockingPod never carries it.
	NoReason BlockingReason = "NoReason"
	// ControllerNotFound: the pod's controller is not in the listers.
	ControllerNotFound BlockingReason = "ControllerNotFound"
	// MinReplicasReached: the pod's ReplicaSet or ReplicationController wants
	// fewer replicas than --min-replica-count.
	MinReplicasReached BlockingReason = "MinReplicasReached"
	// NotReplicated: nothing would recreate the pod elsewhere.
	NotReplicated BlockingReason = "NotReplicated"
	// LocalStorageRequested: the pod's local volume data would be lost.
	LocalStorageRequested BlockingReason = "LocalStorageRequested"
	// NotSafeToEvictAnnotation: safe-to-evict is "false".
	NotSafeToEvictAnnotation BlockingReason = "NotSafeToEvictAnnotation"
	// UnmovableKubeSystemPod: a kube-system pod no PDB covers.
	UnmovableKubeSystemPod BlockingReason = "UnmovableKubeSystemPod"
	// NotEnoughPdb: a PDB selecting the pod has no disruption left.
	NotEnoughPdb BlockingReason = "NotEnoughPdb"
	// BlockedByOnCompletion: safe-to-evict is "on-completion" and the pod still runs.
	BlockedByOnCompletion BlockingReason = "BlockedByOnCompletion"
	// UnexpectedError: a lister or a PDB selector failed.
	UnexpectedError BlockingReason = "UnexpectedError"
)

// BlockingPod names the pod that forbids a node's removal and why.
type BlockingPod struct {
	Pod    *apiv1.Pod
	Reason BlockingReason
	// Detail is a human-readable explanation, for logs and events.
	Detail string
}

// Options are the flags the rules follow; the builder maps them from
// config.Options (field names as there).
type Options struct {
	// SkipNodesWithSystemPods (--skip-nodes-with-system-pods) enables the
	// kube-system rule.
	SkipNodesWithSystemPods bool
	// SkipNodesWithLocalStorage (--skip-nodes-with-local-storage) enables the
	// local-storage rule.
	SkipNodesWithLocalStorage bool
	// SkipNodesWithCustomControllerPods (--skip-nodes-with-custom-controller-pods)
	// makes pods of controllers other than ReplicationController, ReplicaSet,
	// StatefulSet and Job count as not replicated, and enables the early
	// replica-count rule (controller lookup and --min-replica-count).
	SkipNodesWithCustomControllerPods bool
	// MinReplicaCount (--min-replica-count): ReplicaSets and
	// ReplicationControllers with fewer desired replicas keep their node.
	MinReplicaCount int
	// BlockingSystemPodDisruptionTimeout (--blocking-system-pod-distruption-timeout):
	// a kube-system pod without a PDB stops blocking once it is this old
	// (measured from its creation). Zero waives every such pod at once.
	BlockingSystemPodDisruptionTimeout time.Duration
	// MaxGracefulTerminationSec (--max-graceful-termination-sec) caps the
	// grace period the long-terminating rule adds after a pod's deletion
	// timestamp; zero means no cap. See longTerminatingRule.
	MaxGracefulTerminationSec int
}

// Listers are what the rules read; a nil lister means "unknown": the
// controllers it would look up are assumed to exist, and a nil PDB lister
// means no PDB is known.
type Listers struct {
	ReplicationControllers corelisters.ReplicationControllerLister
	ReplicaSets            appslisters.ReplicaSetLister
	StatefulSets           appslisters.StatefulSetLister
	// DaemonSets is accepted for parity with upstream's registry; the rules do
	// not read it, since a DaemonSet pod is left on the node whether or not
	// its DaemonSet still exists.
	DaemonSets           appslisters.DaemonSetLister
	Jobs                 batchlisters.JobLister
	PodDisruptionBudgets policylisters.PodDisruptionBudgetLister
}
