package cloudprovider

import (
	"context"
	"strings"
	"time"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// CloudProvider is one cloud's view of the cluster's node groups.
type CloudProvider interface {
	// Name is the provider's name, as given to --cloud-provider.
	Name() string
	// NodeGroups lists the node groups; the list may change after Refresh.
	NodeGroups(ctx context.Context) ([]NodeGroup, error)
	// NodeGroupForNode returns the group of node, or nil when the autoscaler
	// does not manage it. It is also asked about placeholder nodes built from
	// instance ids (Name = ProviderID = instance id) of unregistered instances.
	NodeGroupForNode(ctx context.Context, node *apiv1.Node) (NodeGroup, error)
	// HasInstance reports whether node still has a cloud instance.
	// ErrNotImplemented means: judge by the ToBeDeletedByClusterAutoscaler taint.
	HasInstance(ctx context.Context, node *apiv1.Node) (bool, error)
	// Pricing returns the pricing model, or ErrNotImplemented.
	Pricing(ctx context.Context) (PricingModel, error)
	// GetResourceLimiter returns the cluster-wide resource limits.
	GetResourceLimiter(ctx context.Context) (*ResourceLimiter, error)
	// GPULabel is the node label that carries the GPU type.
	GPULabel() string
	// GetAvailableGPUTypes lists the GPU types the provider knows.
	GetAvailableGPUTypes(ctx context.Context) map[string]struct{}
	// GetNodeGpuConfig returns the GPU of node, or nil when it has none.
	GetNodeGpuConfig(ctx context.Context, node *apiv1.Node) *GpuConfig
	// Refresh is called at the start of every loop, before any other call.
	Refresh(ctx context.Context) error
	// Cleanup is called once when the autoscaler exits.
	Cleanup(ctx context.Context) error
}

// NodeGroup is a set of nodes with the same template, sized by the autoscaler.
type NodeGroup interface {
	// Id is unique among the provider's node groups; it labels metrics, keys
	// back-off, and is what the priority expander matches.
	Id() string
	MinSize() int
	MaxSize() int
	// TargetSize is the size the cloud is asked to reach; it may differ from
	// the registered nodes while instances come and go.
	TargetSize(ctx context.Context) (int, error)
	// IncreaseSize raises the target by delta > 0.
	IncreaseSize(ctx context.Context, delta int) error
	// AtomicIncreaseSize raises the target by delta all-or-nothing: either
	// every instance is created or none is. ErrNotImplemented means the
	// caller must fall back to IncreaseSize and watch the instances itself.
	AtomicIncreaseSize(ctx context.Context, delta int) error
	// DeleteNodes deletes the named nodes and lowers the target accordingly;
	// it refuses to go below MinSize and fails for nodes of other groups.
	DeleteNodes(ctx context.Context, nodes []*apiv1.Node) error
	// ForceDeleteNodes is DeleteNodes without the MinSize check.
	// ErrNotImplemented means: use DeleteNodes.
	ForceDeleteNodes(ctx context.Context, nodes []*apiv1.Node) error
	// DecreaseTargetSize lowers the target by -delta (delta < 0) by cancelling
	// instances not yet created; it never deletes an existing instance.
	DecreaseTargetSize(ctx context.Context, delta int) error
	// Debug describes the group for logs.
	Debug() string
	// Nodes lists every instance, registered or not. Instance.Id equals the
	// Node's spec.providerID once the instance has registered.
	Nodes(ctx context.Context) ([]Instance, error)
	// TemplateNodeInfo describes a node the group would add, with the pods
	// that would start on it. ErrNotImplemented means: derive it from a
	// real node of the group.
	TemplateNodeInfo(ctx context.Context) (*NodeInfo, error)
	// Exist is false for a group that exists only in theory (not created).
	Exist() bool
	// Autoprovisioned is true for groups the autoscaler created.
	Autoprovisioned() bool
	// GetOptions returns per-group overrides of defaults. A nil result or
	// ErrNotImplemented means: use defaults.
	GetOptions(ctx context.Context, defaults config.NodeGroupAutoscalingOptions) (*config.NodeGroupAutoscalingOptions, error)
}

// NodeInfo is a node with the pods it runs; for a template, the pods that
// would start on a new node (DaemonSet and static pods), and the
// ResourceSlices its DRA drivers would publish (bound to Node's name).
type NodeInfo struct {
	Node           *apiv1.Node
	Pods           []*apiv1.Pod
	ResourceSlices []*resourceapi.ResourceSlice
}

// PricingModel prices nodes and pods over a time range.
type PricingModel interface {
	NodePrice(ctx context.Context, node *apiv1.Node, start, end time.Time) (float64, error)
	PodPrice(ctx context.Context, pod *apiv1.Pod, start, end time.Time) (float64, error)
}

// GpuConfig describes the GPU of a node.
type GpuConfig struct {
	Label                string
	Type                 string
	ExtendedResourceName apiv1.ResourceName
	DraDriverName        string
}

// ExposedViaDra reports whether the GPU is a DRA device rather than an extended resource.
func (g *GpuConfig) ExposedViaDra() bool { return g.DraDriverName != "" }

// Instance is one cloud instance of a node group.
type Instance struct {
	// Id is the provider ID the instance's Node will carry.
	Id string
	// Status is optional; nil means the provider does not report it.
	Status *InstanceStatus
}

// InstanceStatus is an instance's state and, for failed creations, the error.
type InstanceStatus struct {
	State     InstanceState
	ErrorInfo *InstanceErrorInfo
}

// InstanceState is the lifecycle state of an instance.
type InstanceState int

// Instance states, with upstream's values.
const (
	InstanceRunning  InstanceState = 1
	InstanceCreating InstanceState = 2
	InstanceDeleting InstanceState = 3
)

// InstanceErrorInfo says why an instance could not be created.
type InstanceErrorInfo struct {
	ErrorClass   InstanceErrorClass
	ErrorCode    string
	ErrorMessage string
}

// InstanceErrorClass classifies creation errors.
type InstanceErrorClass int

// Error classes, with upstream's values.
const (
	// OutOfResourcesErrorClass is a stock-out or quota error: the group
	// should be backed off at once and another group tried.
	OutOfResourcesErrorClass InstanceErrorClass = 1
	OtherErrorClass          InstanceErrorClass = 99
)

func (c InstanceErrorClass) String() string {
	switch c {
	case OutOfResourcesErrorClass:
		return "OutOfResource"
	case OtherErrorClass:
		return "Other"
	}
	return "Unknown"
}

// Upstream's node label and annotation keys that providers and the core share.
const (
	// FakeNodeReasonAnnotation marks placeholder nodes built from instances.
	FakeNodeReasonAnnotation = "k8s.io/cluster-autoscaler/fake-node-reason"
	FakeNodeUnregistered     = "unregistered"
	FakeNodeCreateError      = "create-error"
)

// InstanceNode stands for an instance that may have no Node (or whose Node
// is not at hand), for NodeGroup.DeleteNodes: a node named after the last
// segment of the instance id, with the id as its provider ID.
func InstanceNode(id string) *apiv1.Node {
	name := strings.TrimRight(id, "/")
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	n := &apiv1.Node{}
	n.Name = name
	n.Spec.ProviderID = id
	return n
}
