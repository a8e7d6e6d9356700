package fake

import (
	"context"
	"fmt"
	"slices"
	"sync"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// Call is one recorded provider call.
type Call struct {
	Method string
	Group  string
	Delta  int
	Nodes  []string
}

// Provider is the fake CloudProvider.
type Provider struct {
	mu     sync.Mutex
	groups []*NodeGroup
	calls  []Call
	errs   map[string]error // key: method or method/group
	// flaky are errors for the next calls of a group's increases only.
	flaky   map[string]*flakyError // key: group
	limiter *cloudprovider.ResourceLimiter
	pricing cloudprovider.PricingModel
	// delayListing holds new instances back from Nodes until ListNew.
	delayListing bool
	// armed are errors injected once a trigger call is made.
	armed []armedError
}

type armedError struct {
	trigger, method, group string
	err                    error
}

var _ cloudprovider.CloudProvider = (*Provider)(nil)

// NewProvider returns a provider without node groups and without limits.
func NewProvider() *Provider {
	return &Provider{errs: map[string]error{}, limiter: cloudprovider.NewResourceLimiter(nil, nil)}
}

// AddNodeGroup adds a group with target size and no instances; template may be nil.
func (p *Provider) AddNodeGroup(id string, min, max, target int, template *apiv1.Node) *NodeGroup {
	p.mu.Lock()
	defer p.mu.Unlock()
	g := &NodeGroup{provider: p, id: id, min: min, max: max, target: target, template: template, exist: true}
	p.groups = append(p.groups, g)
	return g
}

// AddNode registers node as a running instance of group id; its providerID
// is set to "fake://<node name>" when empty.
func (p *Provider) AddNode(id string, node *apiv1.Node) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if node.Spec.ProviderID == "" {
		node.Spec.ProviderID = "fake://" + node.Name
	}
	g := p.group(id)
	g.instances = append(g.instances, cloudprovider.Instance{Id: node.Spec.ProviderID,
		Status: &cloudprovider.InstanceStatus{State: cloudprovider.InstanceRunning}})
}

// SetInstanceStatus replaces the status of one instance, e.g. to inject a creation error.
func (p *Provider) SetInstanceStatus(id, instanceID string, status *cloudprovider.InstanceStatus) {
	p.mu.Lock()
	defer p.mu.Unlock()
	g := p.group(id)
	for i := range g.instances {
		if g.instances[i].Id == instanceID {
			g.instances[i].Status = status
		}
	}
}

// InjectError makes method fail with err, for every group or, when group is
// not empty, for that group only. A nil err removes the injection.
func (p *Provider) InjectError(method, group string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := method
	if group != "" {
		key += "/" + group
	}
	if err == nil {
		delete(p.errs, key)
		return
	}
	p.errs[key] = err
}

// InjectErrorAfter makes method fail with err on group, as InjectError,
// from the first call of trigger on that group on (the trigger call itself
// is not affected): a failure that starts mid-way, such as a cloud API that
// stops answering right after an increase.
func (p *Provider) InjectErrorAfter(trigger, method, group string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = append(p.armed, armedError{trigger: trigger, method: method, group: group, err: err})
}

type flakyError struct {
	err     error
	times   int  // calls left that fail
	applied bool // the failing call takes effect all the same
}

// InjectIncreaseError makes the next times increases of group (IncreaseSize
// or AtomicIncreaseSize) fail with err; with applied, each failing call takes
// effect before it returns the error, as a cloud call that timed out after
// it was carried out does. Later calls succeed.
func (p *Provider) InjectIncreaseError(group string, err error, times int, applied bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.flaky == nil {
		p.flaky = map[string]*flakyError{}
	}
	p.flaky[group] = &flakyError{err: err, times: times, applied: applied}
}

// DelayListing makes the instances that later increases create invisible
// to Nodes (while TargetSize counts them) until ListNew lists them, as most
// clouds list a new instance only some time after the increase.
func (p *Provider) DelayListing(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delayListing = on
}

// ListNew lists up to n (all when n < 0) of the group's instances held back
// by DelayListing, oldest first, and returns their ids.
func (p *Provider) ListNew(id string, n int) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	g := p.group(id)
	if n < 0 || n > len(g.unlisted) {
		n = len(g.unlisted)
	}
	var ids []string
	for _, in := range g.unlisted[:n] {
		ids = append(ids, in.Id)
	}
	g.instances = append(g.instances, g.unlisted[:n]...)
	g.unlisted = slices.Clone(g.unlisted[n:])
	return ids
}

// SetResourceLimiter replaces the cluster-wide limits.
func (p *Provider) SetResourceLimiter(l *cloudprovider.ResourceLimiter) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.limiter = l
}

// SetPricing sets the pricing model; nil means ErrNotImplemented.
func (p *Provider) SetPricing(m cloudprovider.PricingModel) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pricing = m
}

// Calls returns the calls recorded so far, in order.
func (p *Provider) Calls() []Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.calls)
}

// record logs a call and returns the injected error for it, if any. Callers hold p.mu.
func (p *Provider) record(c Call) error {
	p.calls = append(p.calls, c)
	err, ok := p.errs[c.Method+"/"+c.Group]
	if !ok {
		err = p.errs[c.Method]
	}
	armed := p.armed[:0]
	for _, a := range p.armed {
		if a.trigger == c.Method && a.group == c.Group {
			p.errs[a.method+"/"+a.group] = a.err
			continue
		}
		armed = append(armed, a)
	}
	p.armed = armed
	return err
}

func (p *Provider) group(id string) *NodeGroup {
	for _, g := range p.groups {
		if g.id == id {
			return g
		}
	}
	panic(fmt.Sprintf("fake: no node group %q", id))
}

// Name implements cloudprovider.CloudProvider.
func (p *Provider) Name() string { return "fake" }

// NodeGroups implements cloudprovider.CloudProvider.
func (p *Provider) NodeGroups(context.Context) ([]cloudprovider.NodeGroup, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.record(Call{Method: "NodeGroups"}); err != nil {
		return nil, err
	}
	out := make([]cloudprovider.NodeGroup, len(p.groups))
	for i, g := range p.groups {
		out[i] = g
	}
	return out, nil
}

// NodeGroupForNode implements cloudprovider.CloudProvider by provider ID.
func (p *Provider) NodeGroupForNode(_ context.Context, node *apiv1.Node) (cloudprovider.NodeGroup, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.record(Call{Method: "NodeGroupForNode", Nodes: []string{node.Name}}); err != nil {
		return nil, err
	}
	for _, g := range p.groups {
		if g.hasInstance(node.Spec.ProviderID) {
			return g, nil
		}
	}
	return nil, nil
}

// HasInstance implements cloudprovider.CloudProvider.
func (p *Provider) HasInstance(_ context.Context, node *apiv1.Node) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, g := range p.groups {
		if g.hasInstance(node.Spec.ProviderID) {
			return true, nil
		}
	}
	return false, nil
}

// Pricing implements cloudprovider.CloudProvider.
func (p *Provider) Pricing(context.Context) (cloudprovider.PricingModel, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pricing == nil {
		return nil, cloudprovider.ErrNotImplemented
	}
	return p.pricing, nil
}

// GetResourceLimiter implements cloudprovider.CloudProvider.
func (p *Provider) GetResourceLimiter(context.Context) (*cloudprovider.ResourceLimiter, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.limiter, nil
}

// GPULabel implements cloudprovider.CloudProvider.
func (p *Provider) GPULabel() string { return "fake.gpu/type" }

// GetAvailableGPUTypes implements cloudprovider.CloudProvider.
func (p *Provider) GetAvailableGPUTypes(context.Context) map[string]struct{} { return nil }

// GetNodeGpuConfig implements cloudprovider.CloudProvider.
func (p *Provider) GetNodeGpuConfig(_ context.Context, node *apiv1.Node) *cloudprovider.GpuConfig {
	return cloudprovider.LabelledGPUConfig(p.GPULabel(), node)
}

// Refresh implements cloudprovider.CloudProvider.
func (p *Provider) Refresh(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.record(Call{Method: "Refresh"})
}

// Cleanup implements cloudprovider.CloudProvider.
func (p *Provider) Cleanup(context.Context) error { return nil }

// NodeGroup is a fake node group.
type NodeGroup struct {
	provider  *Provider
	id        string
	min, max  int
	target    int
	instances []cloudprovider.Instance
	template  *apiv1.Node
	slices    []*resourceapi.ResourceSlice // the template's
	options   *config.NodeGroupAutoscalingOptions
	exist     bool
	created   int
	// unlisted are created instances Nodes does not list yet (DelayListing).
	unlisted []cloudprovider.Instance
	// blocked is what ScaleDownBlocked says.
	blocked string
}

var (
	_ cloudprovider.NodeGroup        = (*NodeGroup)(nil)
	_ cloudprovider.ScaleDownBlocker = (*NodeGroup)(nil)
)

// SetScaleDownBlocked sets why ScaleDownBlocked keeps the group's nodes
// ("" for not).
func (g *NodeGroup) SetScaleDownBlocked(why string) {
	g.provider.mu.Lock()
	defer g.provider.mu.Unlock()
	g.blocked = why
}

// ScaleDownBlocked implements cloudprovider.ScaleDownBlocker.
func (g *NodeGroup) ScaleDownBlocked(context.Context) string {
	g.provider.mu.Lock()
	defer g.provider.mu.Unlock()
	return g.blocked
}

// SetOptions sets the per-group overrides GetOptions returns.
func (g *NodeGroup) SetOptions(o *config.NodeGroupAutoscalingOptions) {
	g.provider.mu.Lock()
	defer g.provider.mu.Unlock()
	g.options = o
}

// SetTemplateResourceSlices sets the ResourceSlices the group's template
// publishes (its nodes' DRA devices).
func (g *NodeGroup) SetTemplateResourceSlices(slices []*resourceapi.ResourceSlice) {
	g.provider.mu.Lock()
	defer g.provider.mu.Unlock()
	g.slices = slices
}

func (g *NodeGroup) hasInstance(id string) bool {
	return id != "" && slices.ContainsFunc(g.instances, func(i cloudprovider.Instance) bool { return i.Id == id })
}

// Id implements cloudprovider.NodeGroup.
func (g *NodeGroup) Id() string { return g.id }

// MinSize implements cloudprovider.NodeGroup.
func (g *NodeGroup) MinSize() int { return g.min }

// MaxSize implements cloudprovider.NodeGroup.
func (g *NodeGroup) MaxSize() int { return g.max }

// Debug implements cloudprovider.NodeGroup.
func (g *NodeGroup) Debug() string { return fmt.Sprintf("%s (min %d, max %d)", g.id, g.min, g.max) }

// Exist implements cloudprovider.NodeGroup.
func (g *NodeGroup) Exist() bool { return g.exist }

// Autoprovisioned implements cloudprovider.NodeGroup.
func (g *NodeGroup) Autoprovisioned() bool { return false }

// TargetSize implements cloudprovider.NodeGroup.
func (g *NodeGroup) TargetSize(context.Context) (int, error) {
	g.provider.mu.Lock()
	defer g.provider.mu.Unlock()
	if err := g.provider.record(Call{Method: "TargetSize", Group: g.id}); err != nil {
		return 0, err
	}
	return g.target, nil
}

// IncreaseSize implements cloudprovider.NodeGroup: new instances are Creating
// until the test registers them.
func (g *NodeGroup) IncreaseSize(_ context.Context, delta int) error {
	return g.increase("IncreaseSize", delta)
}

// AtomicIncreaseSize implements cloudprovider.NodeGroup like IncreaseSize;
// inject ErrNotImplemented to test the fallback.
func (g *NodeGroup) AtomicIncreaseSize(_ context.Context, delta int) error {
	return g.increase("AtomicIncreaseSize", delta)
}

func (g *NodeGroup) increase(method string, delta int) error {
	g.provider.mu.Lock()
	defer g.provider.mu.Unlock()
	if err := g.provider.record(Call{Method: method, Group: g.id, Delta: delta}); err != nil {
		return err
	}
	var flakyErr error
	if f := g.provider.flaky[g.id]; f != nil && f.times > 0 {
		f.times--
		if !f.applied {
			return f.err
		}
		flakyErr = f.err
	}
	if delta <= 0 {
		return fmt.Errorf("size increase must be positive, got %d", delta)
	}
	if g.target+delta > g.max {
		return fmt.Errorf("size increase too large: %d + %d exceeds max %d", g.target, delta, g.max)
	}
	g.target += delta
	for i := 0; i < delta; i++ {
		g.created++
		in := cloudprovider.Instance{Id: fmt.Sprintf("fake://%s-new-%d", g.id, g.created),
			Status: &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating}}
		if g.provider.delayListing {
			g.unlisted = append(g.unlisted, in)
		} else {
			g.instances = append(g.instances, in)
		}
	}
	return flakyErr
}

// DeleteNodes implements cloudprovider.NodeGroup.
func (g *NodeGroup) DeleteNodes(_ context.Context, nodes []*apiv1.Node) error {
	return g.delete("DeleteNodes", nodes, true)
}

// ForceDeleteNodes implements cloudprovider.NodeGroup.
func (g *NodeGroup) ForceDeleteNodes(_ context.Context, nodes []*apiv1.Node) error {
	return g.delete("ForceDeleteNodes", nodes, false)
}

func (g *NodeGroup) delete(method string, nodes []*apiv1.Node, respectMin bool) error {
	g.provider.mu.Lock()
	defer g.provider.mu.Unlock()
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
	}
	if err := g.provider.record(Call{Method: method, Group: g.id, Nodes: names}); err != nil {
		return err
	}
	if respectMin && g.target-len(nodes) < g.min {
		return fmt.Errorf("deleting %d nodes would take %s below its minimum %d", len(nodes), g.id, g.min)
	}
	for _, n := range nodes {
		if !g.hasInstance(n.Spec.ProviderID) {
			return fmt.Errorf("node %s (%s) does not belong to %s", n.Name, n.Spec.ProviderID, g.id)
		}
	}
	for _, n := range nodes {
		g.instances = slices.DeleteFunc(g.instances, func(i cloudprovider.Instance) bool { return i.Id == n.Spec.ProviderID })
		g.target--
	}
	return nil
}

// DecreaseTargetSize implements cloudprovider.NodeGroup: it lowers a target
// that no listed instance backs (cancelling instances not listed yet, newest
// first), then cancels instances still being created; it never removes a
// running one.
func (g *NodeGroup) DecreaseTargetSize(_ context.Context, delta int) error {
	g.provider.mu.Lock()
	defer g.provider.mu.Unlock()
	if err := g.provider.record(Call{Method: "DecreaseTargetSize", Group: g.id, Delta: delta}); err != nil {
		return err
	}
	if delta >= 0 {
		return fmt.Errorf("size decrease must be negative, got %d", delta)
	}
	creating := 0
	for _, i := range g.instances {
		if i.Status != nil && i.Status.State == cloudprovider.InstanceCreating {
			creating++
		}
	}
	// A target above the listed instances (never created) goes first.
	phantom := max(0, g.target-len(g.instances))
	if -delta > phantom+creating {
		return fmt.Errorf("cannot decrease %s by %d: only %d instances are not yet created", g.id, -delta, phantom+creating)
	}
	removed := min(phantom, -delta)
	g.unlisted = g.unlisted[:max(0, len(g.unlisted)-removed)]
	for i := len(g.instances) - 1; i >= 0 && removed < -delta; i-- {
		if s := g.instances[i].Status; s != nil && s.State == cloudprovider.InstanceCreating {
			g.instances = slices.Delete(g.instances, i, i+1)
			removed++
		}
	}
	g.target += delta
	return nil
}

// Nodes implements cloudprovider.NodeGroup.
func (g *NodeGroup) Nodes(context.Context) ([]cloudprovider.Instance, error) {
	g.provider.mu.Lock()
	defer g.provider.mu.Unlock()
	if err := g.provider.record(Call{Method: "Nodes", Group: g.id}); err != nil {
		return nil, err
	}
	return slices.Clone(g.instances), nil
}

// TemplateNodeInfo implements cloudprovider.NodeGroup; an injected error
// stands for a transient failure of the provider's API.
func (g *NodeGroup) TemplateNodeInfo(context.Context) (*cloudprovider.NodeInfo, error) {
	g.provider.mu.Lock()
	defer g.provider.mu.Unlock()
	if err := g.provider.record(Call{Method: "TemplateNodeInfo", Group: g.id}); err != nil {
		return nil, err
	}
	if g.template == nil {
		return nil, cloudprovider.ErrNotImplemented
	}
	info := &cloudprovider.NodeInfo{Node: g.template.DeepCopy()}
	for _, sl := range g.slices {
		info.ResourceSlices = append(info.ResourceSlices, sl.DeepCopy())
	}
	return info, nil
}

// GetOptions implements cloudprovider.NodeGroup.
func (g *NodeGroup) GetOptions(context.Context, config.NodeGroupAutoscalingOptions) (*config.NodeGroupAutoscalingOptions, error) {
	g.provider.mu.Lock()
	defer g.provider.mu.Unlock()
	if g.options == nil {
		return nil, cloudprovider.ErrNotImplemented
	}
	o := *g.options
	return &o, nil
}
