package offline

import (
	"context"
	"errors"
	"fmt"
	"time"

	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/snapshotdump"
)

// ErrOffline is what every change asked of the dump's provider fails with.
var ErrOffline = errors.New("refused: the provider is a /snapshotz dump")

// Provider is the cloud provider of a dump: its node groups, their sizes,
// instances and templates, as the loop that took the dump saw them.
type Provider struct {
	snap     *snapshotdump.DebuggingSnapshot
	groups   []*nodeGroup
	byID     map[string]*nodeGroup
	byInstID map[string]*nodeGroup
}

// NewProvider returns the provider of snap (as Load returned it).
func NewProvider(snap *snapshotdump.DebuggingSnapshot) *Provider {
	p := &Provider{snap: snap, byID: map[string]*nodeGroup{}, byInstID: map[string]*nodeGroup{}}
	for _, sg := range snap.NodeGroups {
		if sg == nil {
			continue
		}
		g := &nodeGroup{sg: sg, p: p}
		p.groups = append(p.groups, g)
		p.byID[sg.Id] = g
		for _, in := range sg.Instances {
			p.byInstID[in.Id] = g
		}
	}
	return p
}

// Name implements cloudprovider.CloudProvider.
func (p *Provider) Name() string { return p.snap.CloudProvider }

// NodeGroups implements cloudprovider.CloudProvider.
func (p *Provider) NodeGroups(context.Context) ([]cloudprovider.NodeGroup, error) {
	out := make([]cloudprovider.NodeGroup, len(p.groups))
	for i, g := range p.groups {
		out[i] = g
	}
	return out, nil
}

// NodeGroupForNode implements cloudprovider.CloudProvider: the dump's
// group of the node, or the group whose instance the node stands for.
func (p *Provider) NodeGroupForNode(_ context.Context, node *apiv1.Node) (cloudprovider.NodeGroup, error) {
	if id, ok := p.snap.NodeGroupOfNode[node.Name]; ok {
		if g := p.byID[id]; g != nil {
			return g, nil
		}
	}
	if g := p.byInstID[node.Spec.ProviderID]; g != nil && node.Spec.ProviderID != "" {
		return g, nil
	}
	return nil, nil
}

// HasInstance implements cloudprovider.CloudProvider: true for a node
// whose provider ID is an instance of the dump; otherwise not known.
func (p *Provider) HasInstance(_ context.Context, node *apiv1.Node) (bool, error) {
	if node.Spec.ProviderID != "" && p.byInstID[node.Spec.ProviderID] != nil {
		return true, nil
	}
	return false, cloudprovider.ErrNotImplemented
}

// Pricing implements cloudprovider.CloudProvider: the template prices the
// dump recorded, or ErrNotImplemented when it has none.
func (p *Provider) Pricing(context.Context) (cloudprovider.PricingModel, error) {
	if p.snap.NodePrices == nil {
		return nil, cloudprovider.ErrNotImplemented
	}
	return pricing{p: p}, nil
}

// GetResourceLimiter implements cloudprovider.CloudProvider.
func (p *Provider) GetResourceLimiter(context.Context) (*cloudprovider.ResourceLimiter, error) {
	l := p.snap.ResourceLimits
	if l == nil {
		return cloudprovider.NewResourceLimiter(nil, nil), nil
	}
	return cloudprovider.NewResourceLimiter(l.Min, l.Max), nil
}

// GPULabel implements cloudprovider.CloudProvider.
func (p *Provider) GPULabel() string { return p.snap.GPULabel }

// GetAvailableGPUTypes implements cloudprovider.CloudProvider.
func (p *Provider) GetAvailableGPUTypes(context.Context) map[string]struct{} {
	out := map[string]struct{}{}
	for _, t := range p.snap.GPUTypes {
		out[t] = struct{}{}
	}
	return out
}

// GetNodeGpuConfig implements cloudprovider.CloudProvider: the GPU the
// dump recorded for the node's name; for a node not in the dump (a copy
// of a template), the GPU label's value.
func (p *Provider) GetNodeGpuConfig(_ context.Context, node *apiv1.Node) *cloudprovider.GpuConfig {
	if gpu := p.snap.GPUConfigs[node.Name]; gpu != nil {
		c := *gpu
		return &c
	}
	for _, gpu := range p.snap.GPUConfigs {
		if gpu != nil && gpu.Label != "" && node.Labels[gpu.Label] == gpu.Type {
			c := *gpu
			return &c
		}
	}
	return nil
}

// Refresh implements cloudprovider.CloudProvider: the dump does not change.
func (p *Provider) Refresh(context.Context) error { return nil }

// Cleanup implements cloudprovider.CloudProvider.
func (p *Provider) Cleanup(context.Context) error { return nil }

// nodeGroup is one node group of the dump.
type nodeGroup struct {
	sg *snapshotdump.SnapshotNodeGroup
	p  *Provider
}

func (g *nodeGroup) err(method string) error {
	if msg, ok := g.sg.Errors[method]; ok {
		return fmt.Errorf("%s of node group %s, as recorded in the dump: %s", method, g.sg.Id, msg)
	}
	return nil
}

func (g *nodeGroup) Id() string            { return g.sg.Id }
func (g *nodeGroup) MinSize() int          { return g.sg.MinSize }
func (g *nodeGroup) MaxSize() int          { return g.sg.MaxSize }
func (g *nodeGroup) Debug() string         { return g.sg.Debug }
func (g *nodeGroup) Exist() bool           { return g.sg.Exist }
func (g *nodeGroup) Autoprovisioned() bool { return g.sg.Autoprovisioned }

func (g *nodeGroup) TargetSize(context.Context) (int, error) {
	if err := g.err("TargetSize"); err != nil {
		return 0, err
	}
	return g.sg.TargetSize, nil
}

func (g *nodeGroup) refuse(what string) error {
	return fmt.Errorf("%s of %s: %w", what, g.sg.Id, ErrOffline)
}

func (g *nodeGroup) IncreaseSize(context.Context, int) error { return g.refuse("increasing the size") }
func (g *nodeGroup) AtomicIncreaseSize(context.Context, int) error {
	return g.refuse("increasing the size")
}
func (g *nodeGroup) DeleteNodes(context.Context, []*apiv1.Node) error {
	return g.refuse("deleting nodes")
}
func (g *nodeGroup) ForceDeleteNodes(context.Context, []*apiv1.Node) error {
	return g.refuse("deleting nodes")
}
func (g *nodeGroup) DecreaseTargetSize(context.Context, int) error {
	return g.refuse("decreasing the target size")
}

func (g *nodeGroup) Nodes(context.Context) ([]cloudprovider.Instance, error) {
	if err := g.err("Nodes"); err != nil {
		return nil, err
	}
	out := make([]cloudprovider.Instance, 0, len(g.sg.Instances))
	for _, in := range g.sg.Instances {
		i := cloudprovider.Instance{Id: in.Id}
		if in.State != 0 || in.ErrorClass != 0 {
			i.Status = &cloudprovider.InstanceStatus{State: in.State}
			if in.ErrorClass != 0 || in.ErrorCode != "" {
				i.Status.ErrorInfo = &cloudprovider.InstanceErrorInfo{ErrorClass: in.ErrorClass, ErrorCode: in.ErrorCode,
					ErrorMessage: in.ErrorMessage}
			}
		}
		out = append(out, i)
	}
	return out, nil
}

// TemplateNodeInfo is the dump's template node of the group; a group the
// dump has none for is built from its nodes, as the loop did.
func (g *nodeGroup) TemplateNodeInfo(context.Context) (*cloudprovider.NodeInfo, error) {
	if err := g.err("TemplateNodeInfo"); err != nil {
		return nil, err
	}
	tn := g.p.snap.TemplateNodes[g.sg.Id]
	if tn == nil || tn.Node == nil {
		return nil, cloudprovider.ErrNotImplemented
	}
	ni := &cloudprovider.NodeInfo{Node: tn.Node.DeepCopy()}
	for _, pod := range tn.Pods {
		if pod != nil {
			ni.Pods = append(ni.Pods, pod.DeepCopy())
		}
	}
	for _, rs := range tn.ResourceSlices {
		if rs != nil {
			ni.ResourceSlices = append(ni.ResourceSlices, rs.DeepCopy())
		}
	}
	return ni, nil
}

func (g *nodeGroup) GetOptions(context.Context, config.NodeGroupAutoscalingOptions) (*config.NodeGroupAutoscalingOptions, error) {
	if err := g.err("GetOptions"); err != nil {
		return nil, err
	}
	if g.sg.Options == nil {
		return nil, cloudprovider.ErrNotImplemented
	}
	o := *g.sg.Options
	return &o, nil
}

// pricing prices a node at the hourly price the dump recorded for its
// group's template node.
type pricing struct{ p *Provider }

func (m pricing) NodePrice(ctx context.Context, node *apiv1.Node, start, end time.Time) (float64, error) {
	g, _ := m.p.NodeGroupForNode(ctx, node)
	id := ""
	if g != nil {
		id = g.Id()
	} else {
		id = m.p.templateGroup(node)
	}
	price, ok := m.p.snap.NodePrices[id]
	if !ok {
		return 0, fmt.Errorf("node %s: the dump has no price for its group: %w", node.Name, cloudprovider.ErrNotImplemented)
	}
	return price * end.Sub(start).Hours(), nil
}

// PodPrice prices pod on the dump's linear basis: what the provider asked
// for a pod without requests, plus its cores and GiB of memory at what one
// of each added.
func (m pricing) PodPrice(_ context.Context, pod *apiv1.Pod, start, end time.Time) (float64, error) {
	b := m.p.snap.PodPrices
	if b == nil {
		return 0, fmt.Errorf("pod prices are not in the dump: %w", cloudprovider.ErrNotImplemented)
	}
	var cores, gib float64
	for _, c := range pod.Spec.Containers {
		cores += c.Resources.Requests.Cpu().AsApproximateFloat64()
		gib += c.Resources.Requests.Memory().AsApproximateFloat64() / (1 << 30)
	}
	return (b.Base + cores*b.PerCore + gib*b.PerGiB) * end.Sub(start).Hours(), nil
}

// templateGroup is the group whose template node's labels node carries
// (a copy of a template has its labels), or else whose node's labels it
// carries (a group without a provider template is scaled from a copy of
// one of its nodes); "" when none.
func (p *Provider) templateGroup(node *apiv1.Node) string {
	for id, tn := range p.snap.TemplateNodes {
		if tn != nil && tn.Node != nil && hasLabelsOf(node, tn.Node) {
			return id
		}
	}
	for _, sn := range p.snap.NodeList {
		if id, ok := p.snap.NodeGroupOfNode[sn.Node.Name]; ok && hasLabelsOf(node, sn.Node) {
			return id
		}
	}
	return ""
}

// hasLabelsOf reports whether node carries every label of model but its
// host name, model having at least one.
func hasLabelsOf(node, model *apiv1.Node) bool {
	n := 0
	for k, v := range model.Labels {
		if k == apiv1.LabelHostname {
			continue
		}
		if node.Labels[k] != v {
			return false
		}
		n++
	}
	return n > 0
}
