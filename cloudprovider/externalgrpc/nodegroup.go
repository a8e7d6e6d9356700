package externalgrpc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/externalgrpc/protos"
	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// NodeGroup is one node group of the server. Its id, sizes and debug are
// those of the answer it was made from; its template is read once. Its
// target size and instances are read (and checked against each other) when
// the groups are listed; those values go to the first caller of TargetSize
// and Nodes in the same loop (clusterstate), and every later call asks the
// server again, so that a size change or a deletion never relies on a
// listing older than the call.
type NodeGroup struct {
	p     *Provider
	id    string
	min   int
	max   int
	debug string

	mu sync.Mutex
	// gen is the provider's loop the primed values belong to.
	gen       uint64
	target    *int
	instances []cloudprovider.Instance
	// listed are the instances read when the group was listed, kept for
	// the provider's instance index.
	listed   []cloudprovider.Instance
	template *apiv1.Node
	noTmpl   error
}

var _ cloudprovider.NodeGroup = (*NodeGroup)(nil)

func (p *Provider) newGroup(pg *protos.NodeGroup) *NodeGroup {
	return &NodeGroup{p: p, id: pg.GetId(), min: int(pg.GetMinSize()), max: int(pg.GetMaxSize()), debug: pg.GetDebug()}
}

// prime reads and checks the target size and instances for loop gen. A
// target below the instances that are neither failed nor being deleted is
// an ErrBadAnswer.
func (g *NodeGroup) prime(ctx context.Context, gen uint64) error {
	ins, err := g.readInstances(ctx)
	if err != nil {
		return err
	}
	t, err := g.readTarget(ctx)
	if err != nil {
		return err
	}
	if live := liveInstances(ins); t < live {
		return badAnswer("node group %q has target size %d below its %d live instances", g.id, t, live)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gen, g.target, g.instances, g.listed = gen, &t, ins, ins
	return nil
}

// takeTarget returns the primed target once, if it is of the current loop.
func (g *NodeGroup) takeTarget() *int {
	gen := g.p.currentGen()
	g.mu.Lock()
	defer g.mu.Unlock()
	t := g.target
	g.target = nil
	if g.gen != gen {
		return nil
	}
	return t
}

// takeInstances returns the primed instances once, if of the current loop.
func (g *NodeGroup) takeInstances() []cloudprovider.Instance {
	gen := g.p.currentGen()
	g.mu.Lock()
	defer g.mu.Unlock()
	ins := g.instances
	g.instances = nil
	if g.gen != gen {
		return nil
	}
	return ins
}

// forget voids the primed values after a change.
func (g *NodeGroup) forget() {
	g.mu.Lock()
	g.target, g.instances = nil, nil
	g.mu.Unlock()
}

func (p *Provider) currentGen() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gen
}

// Id implements cloudprovider.NodeGroup.
func (g *NodeGroup) Id() string { return g.id }

// MinSize implements cloudprovider.NodeGroup.
func (g *NodeGroup) MinSize() int { return g.min }

// MaxSize implements cloudprovider.NodeGroup.
func (g *NodeGroup) MaxSize() int { return g.max }

// Debug implements cloudprovider.NodeGroup.
func (g *NodeGroup) Debug() string {
	if g.debug != "" {
		return g.debug
	}
	return fmt.Sprintf("external gRPC node group %s (min %d, max %d)", g.id, g.min, g.max)
}

// Exist implements cloudprovider.NodeGroup.
func (g *NodeGroup) Exist() bool { return true }

// Autoprovisioned implements cloudprovider.NodeGroup.
func (g *NodeGroup) Autoprovisioned() bool { return false }

// TargetSize implements cloudprovider.NodeGroup. A negative or absurd
// target is an ErrBadAnswer.
func (g *NodeGroup) TargetSize(ctx context.Context) (int, error) {
	if t := g.takeTarget(); t != nil {
		return *t, nil
	}
	return g.readTarget(ctx)
}

func (g *NodeGroup) readTarget(ctx context.Context) (int, error) {
	cctx, cancel := g.p.callCtx(ctx)
	defer cancel()
	resp, err := g.p.client.NodeGroupTargetSize(cctx, &protos.NodeGroupTargetSizeRequest{Id: g.id})
	if err != nil {
		return 0, rpcError(fmt.Sprintf("reading the target size of node group %q", g.id), err, true)
	}
	t := int(resp.GetTargetSize())
	if t < 0 || t > MaxSize {
		return 0, badAnswer("node group %q has target size %d (want 0..%d)", g.id, t, MaxSize)
	}
	return t, nil
}

// liveInstances counts the instances that are neither failed nor being deleted.
func liveInstances(ins []cloudprovider.Instance) int {
	n := 0
	for _, in := range ins {
		if in.Status != nil && (in.Status.ErrorInfo != nil || in.Status.State == cloudprovider.InstanceDeleting) {
			continue
		}
		n++
	}
	return n
}

// IncreaseSize implements cloudprovider.NodeGroup. A server refusal with
// ResourceExhausted is an out-of-resources ScaleUpError, so the group is
// backed off at once.
func (g *NodeGroup) IncreaseSize(ctx context.Context, delta int) error {
	if delta <= 0 {
		return fmt.Errorf("size increase of node group %q must be positive, got %d", g.id, delta)
	}
	target, err := g.readTarget(ctx)
	if err != nil {
		return err
	}
	if target+delta > g.max {
		return fmt.Errorf("size increase of node group %q too large: %d + %d exceeds max %d", g.id, target, delta, g.max)
	}
	defer g.forget()
	cctx, cancel := g.p.callCtx(ctx)
	defer cancel()
	_, err = g.p.client.NodeGroupIncreaseSize(cctx, &protos.NodeGroupIncreaseSizeRequest{Id: g.id, Delta: int32(delta)})
	if err != nil {
		op := fmt.Sprintf("increasing the size of node group %q by %d", g.id, delta)
		if status.Code(err) == codes.ResourceExhausted {
			return cloudprovider.NewOutOfResourcesError("RESOURCE_EXHAUSTED", fmt.Errorf("%s: %w", op, err))
		}
		return rpcError(op, err, false)
	}
	return nil
}

// AtomicIncreaseSize implements cloudprovider.NodeGroup: the protocol has
// no all-or-nothing increase, so the caller falls back to IncreaseSize and
// rolls back by DeleteNodes.
func (g *NodeGroup) AtomicIncreaseSize(context.Context, int) error {
	return cloudprovider.ErrNotImplemented
}

// DeleteNodes implements cloudprovider.NodeGroup. Nothing is asked of the
// server unless every node is, by a fresh listing, an instance of this
// group, and the group stays at or above its minimum.
func (g *NodeGroup) DeleteNodes(ctx context.Context, nodes []*apiv1.Node) error {
	if len(nodes) == 0 {
		return nil
	}
	g.forget()
	current, err := g.readInstances(ctx)
	if err != nil {
		return fmt.Errorf("listing the instances of node group %q before deleting: %w", g.id, err)
	}
	ids := make(map[string]bool, len(current))
	for _, in := range current {
		ids[in.Id] = true
	}
	seen := map[string]bool{}
	req := &protos.NodeGroupDeleteNodesRequest{Id: g.id}
	for _, n := range nodes {
		if n.Spec.ProviderID == "" || !ids[n.Spec.ProviderID] {
			return fmt.Errorf("node %q (provider id %q) is not an instance of node group %q; nothing deleted",
				n.Name, n.Spec.ProviderID, g.id)
		}
		if !seen[n.Spec.ProviderID] {
			seen[n.Spec.ProviderID] = true
			req.Nodes = append(req.Nodes, toProtoNode(n))
		}
	}
	target, err := g.readTarget(ctx)
	if err != nil {
		return err
	}
	if target-len(req.Nodes) < g.min {
		return fmt.Errorf("deleting %d nodes would take node group %q from %d below its minimum %d",
			len(req.Nodes), g.id, target, g.min)
	}
	defer g.forget()
	cctx, cancel := g.p.callCtx(ctx)
	defer cancel()
	if _, err := g.p.client.NodeGroupDeleteNodes(cctx, req); err != nil {
		return rpcError(fmt.Sprintf("deleting %d nodes of node group %q", len(req.Nodes), g.id), err, false)
	}
	return nil
}

// ForceDeleteNodes implements cloudprovider.NodeGroup: the protocol has no
// such call.
func (g *NodeGroup) ForceDeleteNodes(context.Context, []*apiv1.Node) error {
	return cloudprovider.ErrNotImplemented
}

// DecreaseTargetSize implements cloudprovider.NodeGroup. It refuses to ask
// for a target below the group's live instances, which only a deletion of
// existing instances could meet.
func (g *NodeGroup) DecreaseTargetSize(ctx context.Context, delta int) error {
	if delta >= 0 {
		return fmt.Errorf("size decrease of node group %q must be negative, got %d", g.id, delta)
	}
	g.forget()
	current, err := g.readInstances(ctx)
	if err != nil {
		return err
	}
	target, err := g.readTarget(ctx)
	if err != nil {
		return err
	}
	if live := liveInstances(current); target+delta < live {
		return fmt.Errorf("decreasing node group %q by %d would take its target %d below its %d live instances",
			g.id, -delta, target, live)
	}
	defer g.forget()
	cctx, cancel := g.p.callCtx(ctx)
	defer cancel()
	_, err = g.p.client.NodeGroupDecreaseTargetSize(cctx, &protos.NodeGroupDecreaseTargetSizeRequest{Id: g.id, Delta: int32(delta)})
	if err != nil {
		return rpcError(fmt.Sprintf("decreasing the target size of node group %q by %d", g.id, -delta), err, false)
	}
	return nil
}

// Nodes implements cloudprovider.NodeGroup. Duplicate or empty instance
// ids, or an absurd count, are an ErrBadAnswer.
func (g *NodeGroup) Nodes(ctx context.Context) ([]cloudprovider.Instance, error) {
	if ins := g.takeInstances(); ins != nil {
		return append([]cloudprovider.Instance(nil), ins...), nil
	}
	return g.readInstances(ctx)
}

func (g *NodeGroup) readInstances(ctx context.Context) ([]cloudprovider.Instance, error) {
	cctx, cancel := g.p.callCtx(ctx)
	resp, err := g.p.client.NodeGroupNodes(cctx, &protos.NodeGroupNodesRequest{Id: g.id})
	cancel()
	if err != nil {
		return nil, rpcError(fmt.Sprintf("listing the instances of node group %q", g.id), err, true)
	}
	return decodeInstances(g.id, resp)
}

// decodeInstances validates and translates a NodeGroupNodes answer.
func decodeInstances(id string, resp *protos.NodeGroupNodesResponse) ([]cloudprovider.Instance, error) {
	list := resp.GetInstances()
	if len(list) > MaxSize {
		return nil, badAnswer("node group %q lists %d instances (more than %d)", id, len(list), MaxSize)
	}
	out := make([]cloudprovider.Instance, 0, len(list))
	seen := make(map[string]bool, len(list))
	for _, pi := range list {
		iid := pi.GetId()
		if iid == "" {
			return nil, badAnswer("node group %q lists an instance without an id", id)
		}
		if seen[iid] {
			return nil, badAnswer("node group %q lists instance %q twice", id, iid)
		}
		seen[iid] = true
		out = append(out, cloudprovider.Instance{Id: iid, Status: decodeStatus(pi.GetStatus())})
	}
	return out, nil
}

// decodeStatus translates an instance status; unknown states read as
// unknown (0) and unknown error classes as "other".
func decodeStatus(ps *protos.InstanceStatus) *cloudprovider.InstanceStatus {
	if ps == nil {
		return nil
	}
	st := &cloudprovider.InstanceStatus{}
	switch ps.GetInstanceState() {
	case protos.InstanceStatus_instanceRunning:
		st.State = cloudprovider.InstanceRunning
	case protos.InstanceStatus_instanceCreating:
		st.State = cloudprovider.InstanceCreating
	case protos.InstanceStatus_instanceDeleting:
		st.State = cloudprovider.InstanceDeleting
	}
	if ei := ps.GetErrorInfo(); ei != nil {
		class := cloudprovider.OtherErrorClass
		if ei.GetInstanceErrorClass() == int32(cloudprovider.OutOfResourcesErrorClass) {
			class = cloudprovider.OutOfResourcesErrorClass
		}
		st.ErrorInfo = &cloudprovider.InstanceErrorInfo{ErrorClass: class, ErrorCode: ei.GetErrorCode(), ErrorMessage: ei.GetErrorMessage()}
	}
	return st
}

// TemplateNodeInfo implements cloudprovider.NodeGroup. The template is read
// once for the group object's life; a server without templates (or an empty
// answer) gives ErrNotImplemented; bytes that are not a Node are an error.
func (g *NodeGroup) TemplateNodeInfo(ctx context.Context) (*cloudprovider.NodeInfo, error) {
	g.mu.Lock()
	tmpl, noTmpl := g.template, g.noTmpl
	g.mu.Unlock()
	if tmpl != nil {
		return templateInfo(g.id, tmpl.DeepCopy())
	}
	if noTmpl != nil {
		return nil, noTmpl
	}
	cctx, cancel := g.p.callCtx(ctx)
	resp, err := g.p.client.NodeGroupTemplateNodeInfo(cctx, &protos.NodeGroupTemplateNodeInfoRequest{Id: g.id})
	cancel()
	if err != nil {
		err = rpcError(fmt.Sprintf("reading the template of node group %q", g.id), err, true)
		if errors.Is(err, cloudprovider.ErrNotImplemented) {
			g.mu.Lock()
			g.noTmpl = err
			g.mu.Unlock()
		}
		return nil, err
	}
	node, err := decodeTemplate(g.id, resp.GetNodeBytes())
	if err == nil {
		_, err = templateInfo(g.id, node) // its DRA annotations checked once
	}
	if err != nil {
		if !errors.Is(err, cloudprovider.ErrNotImplemented) {
			klog.FromContext(ctx).Error(err, "Ignoring the template the external gRPC cloud provider sent", "nodeGroup", g.id)
		}
		return nil, err
	}
	g.mu.Lock()
	g.template = node
	g.mu.Unlock()
	return templateInfo(g.id, node.DeepCopy())
}

// templateInfo is the NodeInfo of template node: the protocol carries a
// Node only, so the ResourceSlices its nodes publish come from upstream's
// capacity annotations on that Node, when the server sets them:
// capacity.cluster-autoscaler.kubernetes.io/dra-driver with .../gpu-count
// (cloudprovider.GPUTemplateSlices). Annotations that do not parse make the
// template a bad answer.
func templateInfo(id string, node *apiv1.Node) (*cloudprovider.NodeInfo, error) {
	info := &cloudprovider.NodeInfo{Node: node}
	driver := strings.TrimSpace(node.Annotations[cloudprovider.DRADriverAnnotation])
	count, hasCount := node.Annotations[cloudprovider.GPUCountAnnotation]
	if driver == "" || !hasCount {
		return info, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(count))
	if err != nil {
		return nil, badAnswer("the template of node group %q: %s %q is not an integer", id, cloudprovider.GPUCountAnnotation, count)
	}
	slices, err := cloudprovider.GPUTemplateSlices(node.Name, driver, n)
	if err != nil {
		return nil, badAnswer("the template of node group %q: %v", id, err)
	}
	info.ResourceSlices = slices
	return info, nil
}

// decodeTemplate reads a template Node from its protobuf bytes.
func decodeTemplate(id string, b []byte) (*apiv1.Node, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("node group %q has no template: %w", id, cloudprovider.ErrNotImplemented)
	}
	node := &apiv1.Node{}
	if err := node.Unmarshal(b); err != nil {
		return nil, badAnswer("the template of node group %q does not decode as a Node: %v", id, err)
	}
	if node.Name == "" {
		node.Name = "template-node-for-" + id
	}
	return node, nil
}

// GetOptions implements cloudprovider.NodeGroup.
func (g *NodeGroup) GetOptions(ctx context.Context, defaults config.NodeGroupAutoscalingOptions) (*config.NodeGroupAutoscalingOptions, error) {
	cctx, cancel := g.p.callCtx(ctx)
	defer cancel()
	resp, err := g.p.client.NodeGroupGetOptions(cctx, &protos.NodeGroupAutoscalingOptionsRequest{Id: g.id, Defaults: toProtoOptions(defaults)})
	if err != nil {
		return nil, rpcError(fmt.Sprintf("reading the options of node group %q", g.id), err, true)
	}
	return decodeOptions(g.id, resp.GetNodeGroupAutoscalingOptions(), defaults)
}
