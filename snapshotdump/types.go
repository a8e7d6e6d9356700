package snapshotdump

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourceapi "k8s.io/api/resource/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// DebuggingSnapshot is what /snapshotz serves: the cluster as the next loop
// observed it. The field names are upstream's, so tools that read its
// snapshots read these.
type DebuggingSnapshot struct {
	StartTimestamp time.Time `json:"StartTimestamp"`
	EndTimestamp   time.Time `json:"EndTimestamp"`
	// NodeList is every node with the pods bound to it.
	NodeList []*SnapshotNode `json:"NodeList"`
	// TemplateNodes are the nodes each node group would add, by group id.
	TemplateNodes map[string]*SnapshotNode `json:"TemplateNodes"`
	// PendingPods are the pods not bound to a node (not upstream's: its
	// snapshot lists only those the simulation could place).
	PendingPods []*apiv1.Pod `json:"PendingPods"`
	Error       string       `json:"Error,omitempty"`
	// The fields below are not upstream's; they let `cluster-autoscaler
	// explain --snapshot` run the loop on the dump without the cluster or
	// the cloud. Dumps without them still load (they are optional).
	SnapshotCloud
	// Objects are the cluster's objects the loop reads besides nodes and
	// pods (set when the Snapshotter has an object source).
	Objects *SnapshotObjects `json:"Objects,omitempty"`
}

// SnapshotNode is a node and its pods; a template node also has its
// ResourceSlices (the devices a new node of the group would publish).
type SnapshotNode struct {
	Node           *apiv1.Node                  `json:"Node"`
	Pods           []*apiv1.Pod                 `json:"Pods"`
	ResourceSlices []*resourceapi.ResourceSlice `json:"ResourceSlices,omitempty"`
}

// SnapshotCloud is what the cloud provider told the loop of a snapshot:
// enough to answer the loop's questions again from the dump.
type SnapshotCloud struct {
	// CloudProvider is the provider's name.
	CloudProvider string `json:"CloudProvider,omitempty"`
	// NodeGroups are the provider's node groups, sorted by id.
	NodeGroups []*SnapshotNodeGroup `json:"NodeGroups"`
	// NodeGroupOfNode maps a node's name to its group's id; nodes of no
	// group are left out.
	NodeGroupOfNode map[string]string `json:"NodeGroupOfNode"`
	// ResourceLimits are the cluster-wide limits (nil when the provider
	// failed to give them).
	ResourceLimits *SnapshotResourceLimits `json:"ResourceLimits,omitempty"`
	// GPULabel and GPUTypes are the provider's GPU label and types;
	// GPUConfigs the GPU of each node (and template node) that has one,
	// by node name.
	GPULabel   string                              `json:"GPULabel,omitempty"`
	GPUTypes   []string                            `json:"GPUTypes,omitempty"`
	GPUConfigs map[string]*cloudprovider.GpuConfig `json:"GPUConfigs,omitempty"`
	// NodePrices is the price of one hour of each group's template node
	// (of one of its nodes for a group without a provider template) under
	// the provider's pricing model, by group id; nil when the provider has
	// none.
	NodePrices map[string]float64 `json:"NodePrices,omitempty"`
	// PodPrices is the provider's price of one hour of a pod, taken as
	// linear in its CPU and memory requests; nil without a pricing model.
	PodPrices *SnapshotPodPrices `json:"PodPrices,omitempty"`
}

// SnapshotPodPrices prices a pod at Base + cores·PerCore + GiB·PerGiB an
// hour: the provider's price of a pod without requests, and what one core
// and one GiB add to it.
type SnapshotPodPrices struct {
	Base    float64 `json:"Base"`
	PerCore float64 `json:"PerCore"`
	PerGiB  float64 `json:"PerGiB"`
}

// SnapshotNodeGroup is one node group as the loop saw it.
type SnapshotNodeGroup struct {
	Id              string `json:"Id"`
	MinSize         int    `json:"MinSize"`
	MaxSize         int    `json:"MaxSize"`
	TargetSize      int    `json:"TargetSize"`
	Debug           string `json:"Debug,omitempty"`
	Exist           bool   `json:"Exist"`
	Autoprovisioned bool   `json:"Autoprovisioned,omitempty"`
	// Instances are the group's instances, registered or not.
	Instances []SnapshotInstance `json:"Instances"`
	// Options are the group's overrides of the defaults (nil: none).
	Options *config.NodeGroupAutoscalingOptions `json:"Options,omitempty"`
	// Errors are the provider's failures to answer, by method
	// (TargetSize, Nodes, TemplateNodeInfo, GetOptions); a
	// TemplateNodeInfo that is not implemented is no error.
	Errors map[string]string `json:"Errors,omitempty"`
}

// SnapshotInstance is one instance of a node group.
type SnapshotInstance struct {
	Id           string                           `json:"Id"`
	State        cloudprovider.InstanceState      `json:"State,omitempty"`
	ErrorClass   cloudprovider.InstanceErrorClass `json:"ErrorClass,omitempty"`
	ErrorCode    string                           `json:"ErrorCode,omitempty"`
	ErrorMessage string                           `json:"ErrorMessage,omitempty"`
}

// SnapshotResourceLimits are the cluster-wide minimum and maximum of each
// limited resource.
type SnapshotResourceLimits struct {
	Min map[string]int64 `json:"Min"`
	Max map[string]int64 `json:"Max"`
}

// SnapshotObjects are the objects besides nodes and pods that the loop's
// drain rules and templates read.
type SnapshotObjects struct {
	DaemonSets             []*appsv1.DaemonSet             `json:"DaemonSets"`
	ReplicaSets            []*appsv1.ReplicaSet            `json:"ReplicaSets"`
	StatefulSets           []*appsv1.StatefulSet           `json:"StatefulSets"`
	Jobs                   []*batchv1.Job                  `json:"Jobs"`
	ReplicationControllers []*apiv1.ReplicationController  `json:"ReplicationControllers"`
	PodDisruptionBudgets   []*policyv1.PodDisruptionBudget `json:"PodDisruptionBudgets"`
	// ConfigMaps are those of the autoscaler's namespace that the loop
	// reads (the priority expander's).
	ConfigMaps []*apiv1.ConfigMap `json:"ConfigMaps,omitempty"`
	// DRA says the cluster serves resource.k8s.io/v1, whose objects the
	// simulation reads: ResourceSlices, ResourceClaims, DeviceClasses and
	// ResourceClaimTemplates.
	DRA                    bool                                 `json:"DRA,omitempty"`
	ResourceSlices         []*resourceapi.ResourceSlice         `json:"ResourceSlices,omitempty"`
	ResourceClaims         []*resourceapi.ResourceClaim         `json:"ResourceClaims,omitempty"`
	DeviceClasses          []*resourceapi.DeviceClass           `json:"DeviceClasses,omitempty"`
	ResourceClaimTemplates []*resourceapi.ResourceClaimTemplate `json:"ResourceClaimTemplates,omitempty"`
}
