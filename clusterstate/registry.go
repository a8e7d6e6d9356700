package clusterstate

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// TimeoutErrorCode is the back-off reason of a scale-up whose nodes did not
// register within the provision time (upstream's code, also the
// failed_scale_ups_total reason).
const TimeoutErrorCode = "timeout"

// NodeCounts are a group's (or the cluster's) nodes and instances by state.
type NodeCounts struct {
	// Registered nodes by readiness.
	Ready, Unready, NotStarted int
	// Suspended are registered nodes with the condition Suspended=True
	// (upstream's suspended state), whatever their Ready condition: they
	// are neither ready nor unready, so they never make a group or the
	// cluster unhealthy.
	Suspended int
	// BeingDeleted are registered nodes the autoscaler is deleting.
	BeingDeleted int
	// Unregistered instances have no Node yet, LongUnregistered have had none
	// for longer than the provision time.
	Unregistered, LongUnregistered int
	// Failed instances carry a creation error.
	Failed int
	// ResourceUnready are the Unready nodes (a subset) whose Ready
	// condition is true but whose devices (DRA ResourceSlices, GPU
	// extended resource) have not appeared by their startup time.
	ResourceUnready int
}

// Registered is the number of registered nodes.
func (c NodeCounts) Registered() int { return c.Ready + c.Unready + c.NotStarted + c.Suspended }

func (c *NodeCounts) add(o NodeCounts) {
	c.Ready += o.Ready
	c.Unready += o.Unready
	c.NotStarted += o.NotStarted
	c.Suspended += o.Suspended
	c.BeingDeleted += o.BeingDeleted
	c.Unregistered += o.Unregistered
	c.LongUnregistered += o.LongUnregistered
	c.Failed += o.Failed
	c.ResourceUnready += o.ResourceUnready
}

// GroupState is one node group as the last Update saw it.
type GroupState struct {
	NodeGroup cloudprovider.NodeGroup
	Target    int
	Counts    NodeCounts
	// Options are the group's effective per-group options.
	Options config.NodeGroupAutoscalingOptions
	// Healthy is false when too many of its nodes are unready or never
	// registered; an unhealthy group is not scaled up.
	Healthy bool
	// NotStartedNodes are the names of its registered nodes that have not
	// started: a simulation sees them as upcoming nodes.
	NotStartedNodes []string
	// ResourceUnreadyNodes are the names of its registered nodes whose
	// Ready condition is true but whose devices are not there yet (see
	// WithResourceSlices); counted as not started while young, as unready
	// after.
	ResourceUnreadyNodes []string
	// Nodes are the group's registered nodes.
	Nodes []*apiv1.Node
	// LongUnregistered are the instances without a Node for longer than
	// the group's provision time, and FailedInstances those whose creation
	// failed.
	LongUnregistered []UnregisteredInstance
	FailedInstances  []cloudprovider.Instance
	// Instances are the group's instances as the provider listed them.
	Instances []cloudprovider.Instance
	// ScaleUp is the in-flight scale-up request, if any.
	ScaleUp *ScaleUpRequest
	// BackedOff and BackoffReason say whether the group is backed off.
	BackedOff     bool
	BackoffReason BackoffReason
	// BackoffUntil is when the back-off ends (zero when not backed off).
	BackoffUntil time.Time
}

// UnregisteredInstance is an instance without a Node, seen first at Since.
type UnregisteredInstance struct {
	Id    string
	Since time.Time
	// Node names a Node that may be this instance though the provider's
	// matching does not say so for sure (cloudprovider.Identify: a provider
	// ID spelt otherwise, the same last segment or name, a Node its provider
	// could not identify): deleting the instance might delete that Node, so
	// it is kept. Empty when there is none; NodeWhy says why, when known.
	Node    string
	NodeWhy string
}

// Identities is the last Update's matching of Nodes to instances
// (cloudprovider.Identify); nil before the first Update.
func (r *Registry) Identities() *cloudprovider.Identities {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.identities
}

// NormalizeProviderID is cloudprovider.NormalizeProviderID.
func NormalizeProviderID(id string) string { return cloudprovider.NormalizeProviderID(id) }

// ScaleUpRequest is a scale-up of a group that is not fulfilled yet.
type ScaleUpRequest struct {
	Increase        int
	Time            time.Time
	ExpectedAddTime time.Time
}

// Failure is a node group backed off by the last Update.
type Failure struct {
	NodeGroup string
	Reason    BackoffReason
	// Class is the provider's error class ("timeout" for timeouts).
	Class string
	Until time.Time
}

// Registry tracks node groups between loops: readiness of their nodes,
// instances that never registered, in-flight scale-ups and their timeouts,
// back-off, and the health of groups and cluster. Update runs once per
// loop; the other methods read what it found and may be called from other
// goroutines (the status writer, metrics).
type Registry struct {
	opts    Options
	backoff *Backoff
	taints  Taints
	// slices, when set, are the ResourceSlices nodes' DRA devices are
	// checked against.
	slices SliceLister

	mu sync.Mutex
	// firstSeen is when each instance without a Node was first seen.
	firstSeen map[string]time.Time
	// seenErrors are failed instances already counted as a failure.
	seenErrors map[string]bool
	scaleUps   map[string]*ScaleUpRequest
	// lastScaleUp is when each group's target was last raised.
	lastScaleUp map[string]time.Time
	groups      map[string]*GroupState
	cluster     NodeCounts
	healthy     bool
	failures    []Failure
	updated     time.Time
	identities  *cloudprovider.Identities
	// scaleDownProbed is when scale-down last planned (ScaleDownProbed).
	scaleDownProbed time.Time
	// transitions remember when each reported status last changed.
	transitions map[string]transition
	// draMismatches are the last Update's DRATemplateMismatches.
	draMismatches map[DRAMismatch]int
	// holds are the back-off holds of the last Update (avoidance.go).
	holds map[string]Hold
}

type transition struct {
	value string
	since time.Time
}

// NewRegistry builds an empty registry. Until the first Update the cluster
// counts as healthy.
func NewRegistry(opts Options, options ...RegistryOption) *Registry {
	r := &Registry{opts: opts, taints: NewTaints(opts.Taints),
		backoff:   NewBackoff(opts.InitialNodeGroupBackoff, opts.MaxNodeGroupBackoff, opts.NodeGroupBackoffResetTimeout),
		firstSeen: map[string]time.Time{}, seenErrors: map[string]bool{}, scaleUps: map[string]*ScaleUpRequest{},
		lastScaleUp: map[string]time.Time{},
		groups:      map[string]*GroupState{}, healthy: true, transitions: map[string]transition{}}
	for _, o := range options {
		o(r)
	}
	return r
}

// nodeReadiness classifies node n of group ng (nil when none) by its Ready
// condition and startup taints and then, when those make it ready, by its
// devices: devicesLate says they are not there yet, and the node is then not
// started while younger than startup (upcoming capacity: no second scale-up
// while its drivers start) and unready after.
func (r *Registry) nodeReadiness(ctx context.Context, devices *deviceCheck, n *apiv1.Node, ng cloudprovider.NodeGroup,
	now time.Time, startup time.Duration) (readiness Readiness, devicesLate bool) {
	readiness = r.taints.NodeReadiness(n, now, startup)
	if readiness != Ready {
		return readiness, false
	}
	why := devices.unready(n, ng)
	if why == "" {
		return Ready, false
	}
	group := ""
	if ng != nil {
		group = ng.Id()
	}
	klog.FromContext(ctx).V(4).Info("Node ready but its devices are not", "node", klog.KObj(n), "nodeGroup", group,
		"why", why)
	if now.Sub(n.CreationTimestamp.Time) >= startup {
		return Unready, true
	}
	return NotStarted, true
}

// nodeGroupsOf returns the group of each node (nil when the provider
// manages none) and the names of each group's nodes, by group id.
func nodeGroupsOf(ctx context.Context, provider cloudprovider.CloudProvider, nodes []*apiv1.Node) ([]cloudprovider.NodeGroup,
	map[string][]string) {
	out, members := make([]cloudprovider.NodeGroup, len(nodes)), map[string][]string{}
	for i, n := range nodes {
		ng, err := provider.NodeGroupForNode(ctx, n)
		if err != nil {
			klog.FromContext(ctx).V(4).Info("Node's group unknown", "node", n.Name, "err", err)
		}
		if ng != nil {
			out[i] = ng
			members[ng.Id()] = append(members[ng.Id()], n.Name)
		}
	}
	return out, members
}

// trackScaleUp ends the group's scale-up request once its nodes are all
// registered, and times it out (back-off, reason "timeout") when they are
// not registered by the expected time.
func (r *Registry) trackScaleUp(ctx context.Context, gs *GroupState, now time.Time) {
	id := gs.NodeGroup.Id()
	req := r.scaleUps[id]
	if req == nil {
		return
	}
	switch {
	case gs.Counts.Registered()+gs.Counts.Failed >= gs.Target:
		delete(r.scaleUps, id)
	case now.After(req.ExpectedAddTime):
		delete(r.scaleUps, id)
		klog.FromContext(ctx).Info("Nodes of a scale-up did not register in time", "nodeGroup", id,
			"increase", req.Increase, "maxNodeProvisionTime", gs.Options.MaxNodeProvisionTime)
		r.fail(ctx, id, BackoffReason{ErrorCode: TimeoutErrorCode, ErrorMessage: fmt.Sprintf(
			"nodes added to group %s failed to register within %v", id, gs.Options.MaxNodeProvisionTime)}, "Other", now)
	default:
		gs.ScaleUp = req
	}
}

func (r *Registry) fail(ctx context.Context, id string, reason BackoffReason, class string, now time.Time) {
	until := r.backoff.RegisterFailure(id, reason, now)
	r.failures = append(r.failures, Failure{NodeGroup: id, Reason: reason, Class: class, Until: until})
	klog.FromContext(ctx).Info("Node group backed off", "nodeGroup", id, "errorClass", class,
		"errorCode", reason.ErrorCode, "until", until)
}

// acceptable applies --ok-total-unready-count and
// --max-total-unready-percentage: unready is too many only when it exceeds
// both the count and the percentage of total.
func (r *Registry) acceptable(unready, total int) bool {
	return unready <= r.opts.OkTotalUnreadyCount ||
		float64(unready) <= r.opts.MaxTotalUnreadyPercentage/100*float64(total)
}

// RegisterScaleUp records an increase of a group's target at now; it is
// expected to register within the group's provision time.
func (r *Registry) RegisterScaleUp(id string, delta int, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	provision := r.opts.NodeGroupDefaults.MaxNodeProvisionTime
	if gs := r.groups[id]; gs != nil {
		provision = gs.Options.MaxNodeProvisionTime
		gs.Target += delta
	}
	req := r.scaleUps[id]
	if req == nil {
		req = &ScaleUpRequest{}
		r.scaleUps[id] = req
	}
	req.Increase += delta
	req.Time = now
	if delta > 0 {
		r.lastScaleUp[id] = now
	}
	req.ExpectedAddTime = now.Add(provision)
	if gs := r.groups[id]; gs != nil {
		gs.ScaleUp = req
	}
}

// LastScaleUp returns when the group's target was last raised (zero if
// never by this process).
func (r *Registry) LastScaleUp(id string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastScaleUp[id]
}

// RegisterFailedScaleUp backs a group off after a failed increase.
func (r *Registry) RegisterFailedScaleUp(ctx context.Context, id string, reason BackoffReason, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail(ctx, id, reason, "Other", now)
	if gs := r.groups[id]; gs != nil {
		gs.BackedOff, gs.BackoffReason = r.backoff.BackedOff(id, now)
		gs.BackoffUntil = r.backoff.Until(id, now)
	}
}

// Groups returns the groups of the last Update, sorted by id.
func (r *Registry) Groups() []*GroupState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sortedGroups()
}

// sortedGroups is Groups for a caller holding r.mu.
func (r *Registry) sortedGroups() []*GroupState {
	out := make([]*GroupState, 0, len(r.groups))
	for _, g := range r.groups {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeGroup.Id() < out[j].NodeGroup.Id() })
	return out
}

// Group returns one group of the last Update, or nil.
func (r *Registry) Group(id string) *GroupState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.groups[id]
}

// ClusterCounts are the totals over all nodes and instances.
func (r *Registry) ClusterCounts() NodeCounts {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cluster
}

// ClusterHealthy reports whether the cluster is healthy enough to autoscale.
func (r *Registry) ClusterHealthy() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.healthy
}

// Failures are the groups the last Update backed off.
func (r *Registry) Failures() []Failure {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Failure(nil), r.failures...)
}

// ScaleUpInProgress reports whether any group has an unfulfilled scale-up.
func (r *Registry) ScaleUpInProgress() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.scaleUps) > 0
}

func isBeingDeleted(n *apiv1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == ToBeDeletedTaint {
			return true
		}
	}
	return false
}

// ToBeDeletedTaint marks a node the autoscaler is deleting.
const ToBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// ScaleDownProbed records that scale-down planned at now: the status
// ConfigMap's scaleDown conditions are probed then (upstream's time of the
// last update of the scale-down candidates), null until scale-down first
// plans, and unchanged by loops that do not plan.
func (r *Registry) ScaleDownProbed(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.scaleDownProbed = now
}
