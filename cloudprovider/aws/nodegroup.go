package aws

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// NodeGroup is one Auto Scaling group as the last Refresh knew it (read
// then, or kept from an earlier read: cache.go). A deletion or decrease
// reads the group afresh first and checks its request against that; an
// increase adds to the desired capacity this loop read, or to a fresh one.
// A change is applied to the kept description when its effect is known,
// else the next Refresh reads the group (writes.go).
type NodeGroup struct {
	p         *Provider
	desc      groupDesc
	readAt    time.Time // when desc was read
	seq       uint64    // the number of the read desc comes from (drift.go)
	min, max  int
	failure   *launchFailure
	instances []cloudprovider.Instance
	// reservation is the Capacity Reservation the group launches into
	// (nil: none; reservations.go): it bounds max and labels the template.
	reservation *groupReservation

	mu       sync.Mutex
	template *apiv1.Node
	// slices are the template's ResourceSlices (draslices.go).
	slices []*resourceapi.ResourceSlice
}

var _ cloudprovider.NodeGroup = (*NodeGroup)(nil)

// Id implements cloudprovider.NodeGroup: the Auto Scaling group's name.
func (g *NodeGroup) Id() string { return g.desc.Name }

// MinSize implements cloudprovider.NodeGroup.
func (g *NodeGroup) MinSize() int { return g.min }

// MaxSize implements cloudprovider.NodeGroup.
func (g *NodeGroup) MaxSize() int { return g.max }

// Debug implements cloudprovider.NodeGroup.
func (g *NodeGroup) Debug() string {
	return fmt.Sprintf("Auto Scaling group %s (min %d, max %d, desired %d, instances %d)", g.desc.Name, g.min, g.max,
		g.desc.Desired, len(g.desc.Instances))
}

// Exist implements cloudprovider.NodeGroup.
func (g *NodeGroup) Exist() bool { return true }

// Autoprovisioned implements cloudprovider.NodeGroup.
func (g *NodeGroup) Autoprovisioned() bool { return false }

// TargetSize implements cloudprovider.NodeGroup: the desired capacity.
func (g *NodeGroup) TargetSize(context.Context) (int, error) { return g.desc.Desired, nil }

// Nodes implements cloudprovider.NodeGroup: the instances, then one
// placeholder (Creating) per unit of desired capacity with no instance yet;
// when the latest scaling activity failed, the placeholders carry its error.
func (g *NodeGroup) Nodes(context.Context) ([]cloudprovider.Instance, error) {
	return append([]cloudprovider.Instance(nil), g.instances...), nil
}

// IncreaseSize implements cloudprovider.NodeGroup with SetDesiredCapacity,
// never above the group's max.
func (g *NodeGroup) IncreaseSize(ctx context.Context, delta int) error {
	if delta <= 0 {
		return fmt.Errorf("size increase of Auto Scaling group %q must be positive, got %d", g.Id(), delta)
	}
	d, err := g.sizeBase(ctx)
	if err != nil {
		return err
	}
	want := d.Desired + delta
	if want > g.max || want > d.Max {
		return fmt.Errorf("size increase of Auto Scaling group %q too large: %d + %d exceeds max %d", g.Id(), d.Desired, delta, min(g.max, d.Max))
	}
	g.p.noteIncrease(g.Id(), g.p.clock.Now())
	if err := g.setDesired(ctx, want, desiredSet(want)); err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Set the desired capacity of an Auto Scaling group", "nodeGroup", g.Id(), "from", d.Desired, "to", want)
	return nil
}

// sizeBase is the description an increase adds to: the group as this
// loop's Refresh read it, when it did and nothing changed it since (the
// core's delta was computed from that very desired capacity); else a fresh
// one. A write of this process to the group since that Refresh makes it a
// fresh one.
func (g *NodeGroup) sizeBase(ctx context.Context) (groupDesc, error) {
	p := g.p
	p.mu.Lock()
	current := p.state.groups[g.Id()] == g && g.readAt.Equal(p.refreshedAt) && !p.dirty[g.Id()] && !p.written[g.Id()]
	p.mu.Unlock()
	if current {
		return g.desc, nil
	}
	return p.describeOne(ctx, g.Id())
}

// setDesired sets the desired capacity to n; on success apply (when not
// nil) is applied to the kept description, else the next Refresh reads
// the group.
func (g *NodeGroup) setDesired(ctx context.Context, n int, apply func(*groupDesc) bool) error {
	g.p.beginWrite(g.Id())
	_, err := g.p.asg.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String(g.Id()),
		DesiredCapacity: aws.Int32(int32(n)), HonorCooldown: aws.Bool(false)})
	g.p.endWrite(g.Id())
	if err == nil && apply != nil {
		g.p.applyWrite(g.Id(), apply)
	} else {
		g.p.invalidate(g.Id())
	}
	return callError(fmt.Sprintf("setting the desired capacity of Auto Scaling group %q to %d", g.Id(), n), err, false)
}

// AtomicIncreaseSize implements cloudprovider.NodeGroup: an Auto Scaling
// group cannot promise all of a desired capacity or none, so the caller
// increases with IncreaseSize and rolls back by deleting the instances it
// attributes to its request by name (Nodes lists every instance with its
// id, and the placeholders of capacity still to launch).
func (g *NodeGroup) AtomicIncreaseSize(context.Context, int) error {
	return cloudprovider.ErrNotImplemented
}

// DeleteNodes implements cloudprovider.NodeGroup. Every node must be, by a
// fresh description of the group, one of its instances or placeholders,
// and the group must stay at or above its min; then each instance is
// terminated by id with TerminateInstanceInAutoScalingGroup, decrementing
// the desired capacity, and placeholders still without an instance are
// cancelled by lowering the desired capacity by as many.
func (g *NodeGroup) DeleteNodes(ctx context.Context, nodes []*apiv1.Node) error {
	if len(nodes) == 0 {
		return nil
	}
	d, err := g.p.describeOne(ctx, g.Id())
	if err != nil {
		return err
	}
	plan, err := g.planDeletion(d, nodes)
	if err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	for i, id := range plan.terminate {
		g.p.beginWrite(g.Id())
		_, err := g.p.asg.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
			InstanceId: aws.String(id), ShouldDecrementDesiredCapacity: aws.Bool(true)})
		g.p.endWrite(g.Id())
		if err != nil {
			g.p.invalidate(g.Id())
			return fmt.Errorf("%w (terminated before it: %v)", callError(fmt.Sprintf("terminating instance %s of Auto Scaling group %q", id, g.Id()), err, false),
				plan.terminate[:i])
		}
		g.p.applyWrite(g.Id(), g.p.terminatedIn(id))
		logger.Info("Terminated an instance of an Auto Scaling group", "nodeGroup", g.Id(), "instance", id)
	}
	if plan.cancel > 0 {
		d, err := g.p.describeOne(ctx, g.Id())
		if err != nil {
			return err
		}
		cancel := min(plan.cancel, d.Desired-d.live())
		if cancel <= 0 {
			logger.Info("Placeholders to delete have instances now; nothing cancelled", "nodeGroup", g.Id(), "placeholders", plan.cancel)
			return nil
		}
		if err := g.cancelCapacity(ctx, d, d.Desired-cancel); err != nil {
			return err
		}
	}
	return nil
}

type deletionPlan struct {
	terminate []string
	cancel    int
}

// planDeletion checks nodes against a fresh description d of the group.
func (g *NodeGroup) planDeletion(d groupDesc, nodes []*apiv1.Node) (deletionPlan, error) {
	var plan deletionPlan
	seen := map[string]bool{}
	placeholders := map[string]bool{}
	for n := 0; n < d.Desired-d.live(); n++ {
		placeholders[placeholderID(d.Name, n)] = true
	}
	for _, node := range nodes {
		id, ok := instanceIDOf(node)
		if !ok {
			return plan, fmt.Errorf("node %q (provider id %q) is not an AWS instance; nothing deleted", node.Name, node.Spec.ProviderID)
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		if isPlaceholder(id) {
			if !placeholders[id] {
				return plan, fmt.Errorf("node %q is not a placeholder of Auto Scaling group %q now; nothing deleted", node.Name, g.Id())
			}
			plan.cancel++
			continue
		}
		in, ok := d.findInstance(id)
		if !ok {
			return plan, fmt.Errorf("node %q (instance %s) is not an instance of Auto Scaling group %q; nothing deleted", node.Name, id, g.Id())
		}
		if in.terminating() {
			continue // on its way out already
		}
		plan.terminate = append(plan.terminate, id)
	}
	floor := max(g.min, d.Min)
	if n := len(plan.terminate) + plan.cancel; d.Desired-n < floor {
		return plan, fmt.Errorf("deleting %d nodes would take Auto Scaling group %q from %d below its min %d; nothing deleted",
			n, g.Id(), d.Desired, floor)
	}
	return plan, nil
}

// ForceDeleteNodes implements cloudprovider.NodeGroup: AWS refuses to go
// below the group's min anyway, so the caller uses DeleteNodes.
func (g *NodeGroup) ForceDeleteNodes(context.Context, []*apiv1.Node) error {
	return cloudprovider.ErrNotImplemented
}

// DecreaseTargetSize implements cloudprovider.NodeGroup: it lowers the
// desired capacity only by capacity with no instance behind it (by a fresh
// description), with the instances protected from scale-in meanwhile
// (cancelCapacity), so AWS has no instance to pick and terminate.
func (g *NodeGroup) DecreaseTargetSize(ctx context.Context, delta int) error {
	if delta >= 0 {
		return fmt.Errorf("size decrease of Auto Scaling group %q must be negative, got %d", g.Id(), delta)
	}
	// Fresh, never the loop's kept description: an instance launched or
	// gone Pending since then must stop the cancellation (cancelCapacity
	// protects the instances this lists).
	d, err := g.p.describeOne(ctx, g.Id())
	if err != nil {
		return err
	}
	want := d.Desired + delta
	if live := d.live(); want < live {
		return fmt.Errorf("decreasing Auto Scaling group %q by %d would take its desired capacity %d below its %d instances; "+
			"only capacity not launched yet is cancelled", g.Id(), -delta, d.Desired, live)
	}
	if want < d.Min {
		return fmt.Errorf("decreasing Auto Scaling group %q by %d would take it below its min %d", g.Id(), -delta, d.Min)
	}
	return g.cancelCapacity(ctx, d, want)
}

// TemplateNodeInfo implements cloudprovider.NodeGroup: a node of the
// instance type new instances get (the launch template's or
// configuration's; for a mixed-instances policy the least of the types it
// may launch, requirements.go), in the zone of
// the first subnet, shaped by the node-template tags, with the
// ResourceSlices of the DRA driver the dra-driver tag names (draslices.go).
// Built once per group object (that is, per Refresh).
func (g *NodeGroup) TemplateNodeInfo(ctx context.Context) (*cloudprovider.NodeInfo, error) {
	g.mu.Lock()
	tmpl, slices := g.template, g.slices
	g.mu.Unlock()
	if tmpl == nil {
		node, built, err := g.buildTemplate(ctx)
		if err != nil {
			return nil, fmt.Errorf("template of Auto Scaling group %q: %w", g.Id(), err)
		}
		g.mu.Lock()
		g.template, g.slices = node, built
		g.mu.Unlock()
		tmpl, slices = node, built
	}
	info := &cloudprovider.NodeInfo{Node: tmpl.DeepCopy()}
	for _, sl := range slices {
		info.ResourceSlices = append(info.ResourceSlices, sl.DeepCopy())
	}
	return info, nil
}

func (g *NodeGroup) buildTemplate(ctx context.Context) (*apiv1.Node, []*resourceapi.ResourceSlice, error) {
	d := &g.desc
	t, err := g.p.templateType(ctx, d)
	if err != nil {
		return nil, nil, err
	}
	zoneErr := g.p.loadSubnets(ctx, d.Subnets)
	if zoneErr != nil && !errors.Is(zoneErr, errSubnetsRefused) {
		return nil, nil, zoneErr
	}
	zone := d.defaultZone(g.p.facts.subnetZone)
	if zoneErr != nil {
		g.p.noteZoneFallback(ctx, d.Name, zone)
	}
	managed, _ := g.p.managedNodegroup(ctx, d.Tags)
	node, err := buildTemplate(templateInput{Group: d.Name, Region: g.p.region, Zone: zone, Type: t, Tags: d.Tags, Managed: managed,
		Capacity: g.p.groupCapacity(d)})
	if err != nil {
		return nil, nil, err
	}
	reservationLabels(node, g.reservation, d.Tags)
	return node, g.p.templateSlices(ctx, d, node.Name, t), nil
}

// GetOptions implements cloudprovider.NodeGroup from the group's option
// tags: upstream's k8s.io/cluster-autoscaler/node-template/autoscaling-options/<option>,
// or its alias k8s.io/cluster-autoscaler/autoscaling-options/<option>
// (upstream's wins where both name one option).
func (g *NodeGroup) GetOptions(_ context.Context, defaults config.NodeGroupAutoscalingOptions) (*config.NodeGroupAutoscalingOptions, error) {
	o, err := parseOptions(g.desc.Tags, defaults)
	if err != nil {
		return nil, fmt.Errorf("options of Auto Scaling group %q: %w", g.Id(), err)
	}
	return o, nil
}
