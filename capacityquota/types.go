package capacityquota

import (
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group, Version and Resource of the CapacityQuota API.
var (
	GroupVersion = schema.GroupVersion{Group: "autoscaling.x-k8s.io", Version: "v1beta1"}
	Resource     = GroupVersion.WithResource("capacityquotas")
)

// NodesResource is the pseudo-resource that counts nodes.
const NodesResource apiv1.ResourceName = "nodes"

// CapacityQuota limits the summed resources of the nodes its selector picks.
type CapacityQuota struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   Spec   `json:"spec"`
	Status Status `json:"status,omitempty"`
}

// Spec is what the quota limits.
type Spec struct {
	// Selector picks the nodes the limits apply to; absent, every node.
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// Limits are the maximums of the picked nodes' summed resources.
	Limits Limits `json:"limits"`
}

// Limits holds the maximums; resources may name "nodes" to count nodes.
type Limits struct {
	Resources apiv1.ResourceList `json:"resources,omitempty"`
}

// Status is what the picked nodes use now (written by a controller, when
// one runs).
type Status struct {
	Used *Usage `json:"used,omitempty"`
}

// Usage is a sum of resources.
type Usage struct {
	Resources apiv1.ResourceList `json:"resources,omitempty"`
}
