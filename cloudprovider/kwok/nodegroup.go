package kwok

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// Error codes of simulated creation failures.
const (
	ErrorCodeStockout       = "STOCKOUT"
	ErrorCodeCreationFailed = "CREATION_FAILED"
)

// NodeGroup is one simulated node group.
type NodeGroup struct {
	provider *Provider
	cfg      NodeGroupConfig
}

var _ cloudprovider.NodeGroup = (*NodeGroup)(nil)

// Id implements cloudprovider.NodeGroup.
func (g *NodeGroup) Id() string { return g.cfg.Name }

// MinSize implements cloudprovider.NodeGroup.
func (g *NodeGroup) MinSize() int { return g.cfg.MinSize }

// MaxSize implements cloudprovider.NodeGroup.
func (g *NodeGroup) MaxSize() int { return g.cfg.MaxSize }

// Debug implements cloudprovider.NodeGroup.
func (g *NodeGroup) Debug() string {
	return fmt.Sprintf("kwok node group %s (min %d, max %d)", g.cfg.Name, g.cfg.MinSize, g.cfg.MaxSize)
}

// Exist implements cloudprovider.NodeGroup.
func (g *NodeGroup) Exist() bool { return true }

// Autoprovisioned implements cloudprovider.NodeGroup.
func (g *NodeGroup) Autoprovisioned() bool { return false }

// members returns the group's instances. Callers hold the provider's lock.
func (g *NodeGroup) members() []*instance {
	var out []*instance
	for _, in := range g.provider.instances {
		if in.Group == g.cfg.Name && in.DeleteAt.IsZero() {
			out = append(out, in)
		}
	}
	return out
}

// going lists the group's instances being deleted (faults.deletionDelay).
// Callers hold the provider's mu.
func (g *NodeGroup) going() []*instance {
	var out []*instance
	for _, in := range g.provider.instances {
		if in.Group == g.cfg.Name && !in.DeleteAt.IsZero() {
			out = append(out, in)
		}
	}
	return out
}

// apiError is the simulated failure of a call (faults.apiErrorRate), or nil.
func (g *NodeGroup) apiError(op string) error {
	if r := g.cfg.Faults.APIErrorRate; r > 0 && g.provider.random() < r {
		return fmt.Errorf("kwok: simulated API error in %s of node group %s: %w", op, g.cfg.Name, cloudprovider.ErrTransient)
	}
	return nil
}

// lostResponse is the simulated timeout of a size change that took effect
// (faults.lostResponseRate), or nil.
func (g *NodeGroup) lostResponse(op string) error {
	if r := g.cfg.Faults.LostResponseRate; r > 0 && g.provider.random() < r {
		return fmt.Errorf("kwok: simulated lost response of %s of node group %s, which took effect: %w", op, g.cfg.Name,
			context.DeadlineExceeded)
	}
	return nil
}

// TargetSize implements cloudprovider.NodeGroup: every instance counts,
// failed ones included, until it is deleted.
func (g *NodeGroup) TargetSize(context.Context) (int, error) {
	if err := g.apiError("TargetSize"); err != nil {
		return 0, err
	}
	g.provider.mu.Lock()
	defer g.provider.mu.Unlock()
	return len(g.members()), nil
}

// IncreaseSize implements cloudprovider.NodeGroup. Each new instance's fate
// is decided by the fault knobs when it is created.
func (g *NodeGroup) IncreaseSize(ctx context.Context, delta int) error {
	return g.faulty("IncreaseSize", func() error { return g.increase(ctx, delta, false) })
}

// AtomicIncreaseSize implements cloudprovider.NodeGroup: when any of the
// delta instances would fail (out of capacity), none is created and the call
// fails, as an all-or-nothing cloud API does.
func (g *NodeGroup) AtomicIncreaseSize(ctx context.Context, delta int) error {
	return g.faulty("AtomicIncreaseSize", func() error { return g.increase(ctx, delta, true) })
}

// faulty runs a size change under the API-error and lost-response faults.
func (g *NodeGroup) faulty(op string, change func() error) error {
	if err := g.apiError(op); err != nil {
		return err
	}
	if err := change(); err != nil {
		return err
	}
	return g.lostResponse(op)
}

func (g *NodeGroup) increase(ctx context.Context, delta int, atomic bool) error {
	if delta <= 0 {
		return fmt.Errorf("size increase of %s must be positive, got %d", g.cfg.Name, delta)
	}
	p := g.provider
	p.mu.Lock()
	members := g.members()
	if len(members)+delta > g.cfg.MaxSize {
		p.mu.Unlock()
		return fmt.Errorf("size increase of %s too large: %d + %d exceeds max %d", g.cfg.Name, len(members), delta, g.cfg.MaxSize)
	}
	live := 0
	for _, in := range members {
		if in.Error == nil {
			live++
		}
	}
	f := g.cfg.Faults
	if atomic && f.OutOfCapacityAfter > 0 && live+delta > f.OutOfCapacityAfter {
		p.mu.Unlock()
		return cloudprovider.NewOutOfResourcesError(ErrorCodeStockout, fmt.Errorf(
			"atomic increase of %s by %d: only %d more instances available", g.cfg.Name, delta, max(0, f.OutOfCapacityAfter-live)))
	}
	now := p.clock.Now()
	created := make([]*instance, 0, delta)
	doomed := g.partialFailures(delta)
	for i := 0; i < delta; i++ {
		in := &instance{Name: g.cfg.Name + "-" + randomSuffix(), Group: g.cfg.Name, CreatedAt: now, held: true}
		switch {
		case doomed[i]:
			// Accepted, and fails when its Node would have appeared.
			in.Error = &cloudprovider.InstanceErrorInfo{ErrorClass: cloudprovider.OtherErrorClass,
				ErrorCode: ErrorCodeCreationFailed, ErrorMessage: "simulated failure of some instances of an increase"}
			in.FailAt = now.Add(f.RegistrationDelay.Duration)
		case f.OutOfCapacityAfter > 0 && live >= f.OutOfCapacityAfter:
			in.Error = &cloudprovider.InstanceErrorInfo{ErrorClass: cloudprovider.OutOfResourcesErrorClass,
				ErrorCode: ErrorCodeStockout, ErrorMessage: fmt.Sprintf("%s has no capacity beyond %d instances", g.cfg.Name, f.OutOfCapacityAfter)}
		case !atomic && f.CreationFailureRate > 0 && p.random() < f.CreationFailureRate:
			in.Error = &cloudprovider.InstanceErrorInfo{ErrorClass: cloudprovider.OtherErrorClass,
				ErrorCode: ErrorCodeCreationFailed, ErrorMessage: "simulated creation failure"}
		case f.NeverRegisterRate > 0 && p.random() < f.NeverRegisterRate:
			// Created, but its Node never appears: RegisterAt stays zero.
			live++
		default:
			in.RegisterAt = now.Add(f.RegistrationDelay.Duration)
			live++
		}
		p.instances[in.Name] = in
		created = append(created, in)
	}
	gen := p.changed()
	p.mu.Unlock()
	// The request is recorded before returning, so a restart does not lose
	// it. Until then its instances are held back from the workers; when it
	// cannot be recorded they are taken out again and the increase fails
	// having changed nothing.
	err := p.flush(ctx, gen)
	p.mu.Lock()
	for _, in := range created {
		in.held = false
		if err != nil && p.instances[in.Name] == in {
			delete(p.instances, in.Name)
		}
	}
	if err != nil {
		p.changed() // a save that raced with ours may hold them: write them out
	}
	p.mu.Unlock()
	if err != nil {
		if !cloudprovider.IsTransient(err) {
			err = fmt.Errorf("%w: %w", cloudprovider.ErrTransient, err)
		}
		return fmt.Errorf("recording the new instances of %s, none created: %w", g.cfg.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("kwok node group increased", "nodeGroup", g.cfg.Name, "delta", delta, "atomic", atomic)
	return nil
}

// partialFailures picks, for one increase of delta instances in
// partialFailureRate of the increases, the instances that fail: between 1
// and delta-1 of them (the one of an increase of 1). Callers hold p.mu.
func (g *NodeGroup) partialFailures(delta int) map[int]bool {
	r := g.cfg.Faults.PartialFailureRate
	if r <= 0 || g.provider.random() >= r {
		return nil
	}
	n := 1
	if delta > 2 {
		n += int(g.provider.random() * float64(delta-1)) // 1 .. delta-1
		n = min(n, delta-1)
	}
	doomed := map[int]bool{}
	for len(doomed) < n {
		doomed[int(g.provider.random()*float64(delta))%delta] = true
	}
	return doomed
}

// DeleteNodes implements cloudprovider.NodeGroup.
func (g *NodeGroup) DeleteNodes(ctx context.Context, nodes []*apiv1.Node) error {
	return g.faulty("DeleteNodes", func() error { return g.delete(ctx, nodes, true) })
}

// ForceDeleteNodes implements cloudprovider.NodeGroup.
func (g *NodeGroup) ForceDeleteNodes(ctx context.Context, nodes []*apiv1.Node) error {
	return g.faulty("ForceDeleteNodes", func() error { return g.delete(ctx, nodes, false) })
}

// delete removes the named instances and their Nodes; nothing is deleted when
// any node is not an instance of this group or the minimum would be broken.
func (g *NodeGroup) delete(ctx context.Context, nodes []*apiv1.Node, respectMin bool) error {
	p := g.provider
	p.mu.Lock()
	var victims []*instance
	seen := map[string]bool{}
	for _, n := range nodes {
		in := p.instanceOf(n)
		if in == nil || in.Group != g.cfg.Name {
			p.mu.Unlock()
			return fmt.Errorf("node %s (%s) is not an instance of %s", n.Name, n.Spec.ProviderID, g.cfg.Name)
		}
		if !in.DeleteAt.IsZero() {
			continue // being deleted already
		}
		if !seen[in.Name] {
			seen[in.Name] = true
			victims = append(victims, in)
		}
	}
	if size := len(g.members()); respectMin && size-len(victims) < g.cfg.MinSize {
		p.mu.Unlock()
		return fmt.Errorf("deleting %d nodes would take %s from %d below its minimum %d", len(victims), g.cfg.Name, size, g.cfg.MinSize)
	}
	if delay := g.cfg.Faults.DeletionDelay.Duration; delay > 0 {
		at := p.clock.Now().Add(delay)
		for _, in := range victims {
			in.DeleteAt = at // the scheduler deletes it and its Node then
		}
		gen := p.changed()
		p.mu.Unlock()
		p.record(ctx, gen, "deletion")
		return nil
	}
	// The instances are being deleted from here on, as a cloud's VMs are once
	// it accepted the call: listed as Deleting until their Nodes are gone. A
	// Node whose deletion fails (kube-apiserver restarting) is retried by the
	// scheduler, so no Node outlives its instance.
	now := p.clock.Now()
	for _, in := range victims {
		in.DeleteAt = now
	}
	gen := p.changed()
	p.mu.Unlock()
	p.record(ctx, gen, "deletion")

	var wg sync.WaitGroup
	sem := make(chan struct{}, max(1, p.workers))
	for _, in := range victims {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := p.rate.Wait(ctx); err != nil {
				return // the scheduler deletes it
			}
			p.removeNode(ctx, in)
		}()
	}
	wg.Wait()
	// The instances whose Nodes went are gone: saved before returning, as
	// the deletion itself was.
	p.mu.Lock()
	gen = p.gen
	p.mu.Unlock()
	p.record(ctx, gen, "deletion")
	return nil
}

// DecreaseTargetSize implements cloudprovider.NodeGroup: it cancels
// instances that have no Node yet, newest first, and never touches a
// registered one.
func (g *NodeGroup) DecreaseTargetSize(ctx context.Context, delta int) error {
	return g.faulty("DecreaseTargetSize", func() error { return g.decrease(ctx, delta) })
}

func (g *NodeGroup) decrease(ctx context.Context, delta int) error {
	if delta >= 0 {
		return fmt.Errorf("size decrease of %s must be negative, got %d", g.cfg.Name, delta)
	}
	p := g.provider
	p.mu.Lock()
	var unregistered []*instance
	for _, in := range g.members() {
		if !in.registered && !p.queued[in.Name] {
			unregistered = append(unregistered, in)
		}
	}
	if -delta > len(unregistered) {
		p.mu.Unlock()
		return fmt.Errorf("cannot decrease %s by %d: only %d instances have not registered", g.cfg.Name, -delta, len(unregistered))
	}
	sortNewestFirst(unregistered)
	for _, in := range unregistered[:-delta] {
		delete(p.instances, in.Name)
	}
	gen := p.changed()
	p.mu.Unlock()
	p.record(ctx, gen, "size decrease")
	return nil
}

func sortNewestFirst(ins []*instance) {
	sort.Slice(ins, func(i, j int) bool {
		if !ins[i].CreatedAt.Equal(ins[j].CreatedAt) {
			return ins[i].CreatedAt.After(ins[j].CreatedAt)
		}
		return ins[i].Name > ins[j].Name
	})
}

// Nodes implements cloudprovider.NodeGroup.
func (g *NodeGroup) Nodes(context.Context) ([]cloudprovider.Instance, error) {
	if err := g.apiError("Nodes"); err != nil {
		return nil, err
	}
	g.provider.mu.Lock()
	defer g.provider.mu.Unlock()
	members := append(g.members(), g.going()...)
	out := make([]cloudprovider.Instance, 0, len(members))
	delay, now := g.cfg.Faults.ListingDelay.Duration, g.provider.clock.Now()
	for _, in := range members {
		if delay > 0 && !in.registered && now.Sub(in.CreatedAt) < delay {
			continue // not listed yet
		}
		out = append(out, cloudprovider.Instance{Id: in.id(), Status: in.status(now)})
	}
	return out, nil
}

// TemplateNodeInfo implements cloudprovider.NodeGroup.
func (g *NodeGroup) TemplateNodeInfo(context.Context) (*cloudprovider.NodeInfo, error) {
	if g.cfg.Template.FromNodes {
		return nil, cloudprovider.ErrNotImplemented
	}
	node := g.newNode("template-node-for-" + g.cfg.Name)
	node.Status.Conditions = []apiv1.NodeCondition{{Type: apiv1.NodeReady, Status: apiv1.ConditionTrue}}
	return &cloudprovider.NodeInfo{Node: node, ResourceSlices: g.resourceSlices(node)}, nil
}

// GetOptions implements cloudprovider.NodeGroup.
func (g *NodeGroup) GetOptions(_ context.Context, defaults config.NodeGroupAutoscalingOptions) (*config.NodeGroupAutoscalingOptions, error) {
	o := g.cfg.Options
	if o == nil {
		return nil, cloudprovider.ErrNotImplemented
	}
	out := defaults
	if o.ScaleDownUtilizationThreshold != nil {
		out.ScaleDownUtilizationThreshold = *o.ScaleDownUtilizationThreshold
	}
	if o.ScaleDownUnneededTime != nil {
		out.ScaleDownUnneededTime = o.ScaleDownUnneededTime.Duration
	}
	if o.ScaleDownUnreadyTime != nil {
		out.ScaleDownUnreadyTime = o.ScaleDownUnreadyTime.Duration
	}
	if o.MaxNodeProvisionTime != nil {
		out.MaxNodeProvisionTime = o.MaxNodeProvisionTime.Duration
	}
	if o.ZeroOrMaxNodeScaling != nil {
		out.ZeroOrMaxNodeScaling = *o.ZeroOrMaxNodeScaling
	}
	if o.MaxNodeLifetime != nil {
		out.MaxNodeLifetime = o.MaxNodeLifetime.Duration
	}
	if o.DisruptionBudget != nil {
		out.DisruptionBudget = *o.DisruptionBudget
	}
	return &out, nil
}

// newNode builds the Node of an instance of this group.
func (g *NodeGroup) newNode(name string) *apiv1.Node {
	t := g.cfg.Template
	labels := map[string]string{
		"kubernetes.io/os":                 "linux",
		"kubernetes.io/arch":               "amd64",
		"node.kubernetes.io/instance-type": g.cfg.Name,
	}
	for k, v := range t.Labels {
		labels[k] = v
	}
	labels["kubernetes.io/hostname"] = name
	annotations := map[string]string{}
	for k, v := range t.Annotations {
		annotations[k] = v
	}
	annotations[NodeGroupAnnotation] = g.cfg.Name
	annotations[KwokNodeAnnotation] = "fake"
	providerID := ProviderIDPrefix + name
	switch {
	case g.cfg.Faults.ForeignProviderID:
		providerID = "othercloud://" + name
	case g.cfg.Faults.NodeProviderIDSpelling == "emptyHost":
		providerID = "kwok:///" + name
	case g.cfg.Faults.NodeProviderIDSpelling == "upperScheme":
		providerID = "KWOK://" + name
	}
	node := &apiv1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
		Spec:       apiv1.NodeSpec{ProviderID: providerID, Taints: append([]apiv1.Taint(nil), t.Taints...)},
		Status:     apiv1.NodeStatus{Capacity: t.Capacity.DeepCopy(), Allocatable: t.Allocatable.DeepCopy()},
	}
	if h := templateHash(node, t.Devices); h != "" {
		annotations[TemplateHashAnnotation] = h // drift.go
	}
	return node
}

// pricing prices nodes by their group's hourly price and pods by their share
// of the cheapest group's CPU price.
type pricing struct{ p *Provider }

func (m pricing) NodePrice(ctx context.Context, node *apiv1.Node, start, end time.Time) (float64, error) {
	g, err := m.p.NodeGroupForNode(ctx, node)
	if err != nil {
		return 0, err
	}
	var cfg *NodeGroupConfig
	if g != nil {
		c := g.(*NodeGroup).cfg
		cfg = &c
	} else if name, ok := node.Annotations[NodeGroupAnnotation]; ok && m.p.groups[name] != nil {
		c := m.p.groups[name].cfg
		cfg = &c
	}
	if cfg == nil {
		return 0, fmt.Errorf("node %s belongs to no kwok node group", node.Name)
	}
	return cfg.PricePerHour * end.Sub(start).Hours(), nil
}

func (m pricing) PodPrice(_ context.Context, pod *apiv1.Pod, start, end time.Time) (float64, error) {
	perCore := -1.0
	for _, g := range m.p.groups {
		cpu := g.cfg.Template.Capacity.Cpu().AsApproximateFloat64()
		if cpu > 0 && g.cfg.PricePerHour > 0 && (perCore < 0 || g.cfg.PricePerHour/cpu < perCore) {
			perCore = g.cfg.PricePerHour / cpu
		}
	}
	if perCore < 0 {
		return 0, nil
	}
	var cores float64
	for _, c := range pod.Spec.Containers {
		cores += c.Resources.Requests.Cpu().AsApproximateFloat64()
	}
	return cores * perCore * end.Sub(start).Hours(), nil
}
