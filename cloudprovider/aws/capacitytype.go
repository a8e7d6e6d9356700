package aws

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// CapacityTypeLabel is the neutral capacity-type label: Karpenter's key
// and values (on-demand, spot), which pods migrating from Karpenter
// already select. Templates carry it next to EKS's
// eks.amazonaws.com/capacityType (ON_DEMAND, SPOT). A group launching
// into a Capacity Reservation or Block is "reserved" (reservations.go).
const CapacityTypeLabel = "karpenter.sh/capacity-type"

// capacityType is how a group's new instances, or an instance, are bought.
type capacityType string

const (
	// capacityUnknown: nothing says (a launch configuration, a launch
	// template not read yet).
	capacityUnknown  capacityType = ""
	capacityOnDemand capacityType = "on-demand"
	capacitySpot     capacityType = "spot"
	// capacityMixed: a group whose new instances may be either (a
	// mixed-instances policy with some On-Demand above its base). Its
	// template carries no capacity-type label, so that a pod selecting
	// one type is not promised it.
	capacityMixed capacityType = "mixed"
)

// eksValue is the capacity type as EKS spells it.
func (c capacityType) eksValue() string {
	switch c {
	case capacityOnDemand:
		return "ON_DEMAND"
	case capacitySpot:
		return "SPOT"
	}
	return ""
}

// capacityOfLabels reads a node's capacity type from either label
// (the neutral one first).
func capacityOfLabels(labels map[string]string) capacityType {
	switch labels[CapacityTypeLabel] {
	case string(capacityOnDemand):
		return capacityOnDemand
	case string(capacitySpot):
		return capacitySpot
	}
	switch labels[EKSCapacityTypeLabel] {
	case "ON_DEMAND":
		return capacityOnDemand
	case "SPOT":
		return capacitySpot
	}
	return capacityUnknown
}

// instancesDistribution is a mixed-instances policy's split between
// On-Demand and Spot.
type instancesDistribution struct {
	// Set: the group has a mixed-instances policy.
	Set bool
	// OnDemandBase instances are On-Demand; of the instances above it,
	// OnDemandPercent percent are On-Demand, the others Spot.
	OnDemandBase, OnDemandPercent int
}

// distributionOf reads a policy's distribution with AWS's defaults (base
// 0, 100 percent On-Demand above it).
func distributionOf(mp *astypes.MixedInstancesPolicy) instancesDistribution {
	d := instancesDistribution{Set: mp != nil, OnDemandPercent: 100}
	if mp == nil || mp.InstancesDistribution == nil {
		return d
	}
	if b := mp.InstancesDistribution.OnDemandBaseCapacity; b != nil && *b > 0 {
		d.OnDemandBase = int(*b)
	}
	if p := mp.InstancesDistribution.OnDemandPercentageAboveBaseCapacity; p != nil {
		d.OnDemandPercent = min(max(int(*p), 0), 100)
	}
	return d
}

// next is the capacity type of the instances a scale-up of a group with
// desired capacity adds: On-Demand when everything above the base is
// (percent 100); Spot when nothing above it is (percent 0) and the base
// is filled; else mixed (a scale-up may add both).
func (d instancesDistribution) next(desired int) capacityType {
	switch {
	case d.OnDemandPercent >= 100:
		return capacityOnDemand
	case d.OnDemandPercent <= 0 && desired >= d.OnDemandBase:
		return capacitySpot
	}
	return capacityMixed
}

// capacityFacts keeps the market type of the launch template versions
// read (facts.go reads them for their instance type and notes it here).
type capacityFacts struct {
	mu     sync.Mutex
	market map[string]capacityType // launchTemplateRef.String() -> type
	// lifecycle is what DescribeInstances said of instances: whether each
	// is a Spot one (it never changes for an instance).
	lifecycle map[string]capacityType
	// describeFailedAt is when DescribeInstances last failed (tried again
	// after lifecycleRetry).
	describeFailedAt int64
}

func newCapacityFacts() *capacityFacts {
	return &capacityFacts{market: map[string]capacityType{}, lifecycle: map[string]capacityType{}}
}

// noteLaunchMarket records the market type of a launch template version.
func (p *Provider) noteLaunchMarket(ref launchTemplateRef, data *ec2types.ResponseLaunchTemplateData) {
	if p.capacity == nil || data == nil {
		return
	}
	c := capacityOnDemand
	if mo := data.InstanceMarketOptions; mo != nil && mo.MarketType == ec2types.MarketTypeSpot {
		c = capacitySpot
	}
	p.capacity.mu.Lock()
	p.capacity.market[ref.String()] = c
	p.capacity.mu.Unlock()
}

// groupCapacity is the capacity type of a group's new instances: its
// mixed-instances policy's distribution (AWS refuses a launch template
// with market options in such a policy), else the market type of its
// launch template (read with its instance type), else unknown.
func (p *Provider) groupCapacity(d *groupDesc) capacityType {
	if d.Distribution.Set {
		return d.Distribution.next(d.Desired)
	}
	if d.LaunchTemplate == nil || p.capacity == nil {
		return capacityUnknown
	}
	p.capacity.mu.Lock()
	defer p.capacity.mu.Unlock()
	return p.capacity.market[d.LaunchTemplate.String()]
}

// capacityLabels are the labels of a capacity type (none when mixed or
// unknown).
func capacityLabels(c capacityType) map[string]string {
	if c != capacityOnDemand && c != capacitySpot {
		return nil
	}
	return map[string]string{CapacityTypeLabel: string(c), EKSCapacityTypeLabel: c.eksValue()}
}

// instancesAPI is the EC2 call that tells an instance's lifecycle (the
// SDK's EC2 client has it; a test double may not).
type instancesAPI interface {
	DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
}

// lifecycleRetry is how long after a failed DescribeInstances (IAM may
// not allow it) the lifecycle of instances is not asked again.
const lifecycleRetry = 10 * time.Minute

// describeInstancesBatch is how many instance IDs one DescribeInstances names.
const describeInstancesBatch = 100

// nodeCapacity is the capacity type of a running node: its labels, else
// its group's when the group's new instances are all of one type, else
// the instance's lifecycle (DescribeInstances: the instances of the
// node's group whose lifecycle is not known yet, in one call per 100),
// else unknown.
func (p *Provider) nodeCapacity(ctx context.Context, node *apiv1.Node) capacityType {
	if c := capacityOfLabels(node.Labels); c != capacityUnknown {
		return c
	}
	id, ok := instanceIDOf(node)
	if !ok || isPlaceholder(id) {
		return capacityUnknown
	}
	g := p.current().byInstance[id]
	if g == nil {
		return capacityUnknown
	}
	if c := p.groupCapacity(&g.desc); c == capacityOnDemand || c == capacitySpot {
		if !g.desc.Distribution.Set || g.desc.Distribution.OnDemandBase == 0 {
			return c // every instance of the group is of that type
		}
	}
	c := p.capacity
	c.mu.Lock()
	known, done := c.lifecycle[id]
	failedAt := c.describeFailedAt
	c.mu.Unlock()
	if done {
		return known
	}
	api, ok := p.ec2.(instancesAPI)
	if !ok || (failedAt != 0 && p.clock.Now().UnixNano()-failedAt < int64(lifecycleRetry)) {
		return capacityUnknown
	}
	var ids []string
	c.mu.Lock()
	if len(c.lifecycle) > 4*len(p.current().byInstance)+describeInstancesBatch {
		for known := range c.lifecycle { // instances gone since
			if p.current().byInstance[known] == nil {
				delete(c.lifecycle, known)
			}
		}
	}
	for _, in := range g.desc.Instances {
		if _, seen := c.lifecycle[in.ID]; !seen && !in.terminating() {
			ids = append(ids, in.ID)
		}
	}
	c.mu.Unlock()
	if err := p.readLifecycles(ctx, api, ids); err != nil {
		klog.FromContext(ctx).V(2).Info("Could not read the instances' lifecycle; pricing them On-Demand", "nodeGroup", g.Id(), "err", err)
		c.mu.Lock()
		c.describeFailedAt = p.clock.Now().UnixNano()
		c.mu.Unlock()
		return capacityUnknown
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lifecycle[id]
}

// readLifecycles reads whether the instances are Spot, 100 per call.
func (p *Provider) readLifecycles(ctx context.Context, api instancesAPI, ids []string) error {
	for start := 0; start < len(ids); start += describeInstancesBatch {
		batch := ids[start:min(start+describeInstancesBatch, len(ids))]
		out, err := api.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: batch})
		if err != nil {
			return callError(fmt.Sprintf("describing %d instances", len(batch)), err, true)
		}
		p.capacity.mu.Lock()
		for _, r := range out.Reservations {
			for _, in := range r.Instances {
				c := capacityOnDemand
				if in.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot {
					c = capacitySpot
				}
				p.capacity.lifecycle[aws.ToString(in.InstanceId)] = c
			}
		}
		p.capacity.mu.Unlock()
	}
	return nil
}
