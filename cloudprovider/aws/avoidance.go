package aws

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// SpotInterruptedCode is the back-off code of a group all of whose Spot
// offerings were interrupted lately.
const SpotInterruptedCode = "SpotInterrupted"

// offering is a group's Spot capacity of one instance type in one zone.
type offering struct {
	group, typ, zone string
}

// avoidance keeps the Spot offerings interrupted lately
// (--aws-interrupted-capacity-avoid-time) and the groups all of whose Spot
// offerings they are.
type avoidance struct {
	ttl time.Duration

	mu sync.Mutex
	// until is when each interrupted offering may be used again.
	until map[offering]time.Time
	// groups are the groups avoided as a whole, as decided at the last
	// notice for each.
	groups map[string]cloudprovider.AvoidedGroup
}

// WithInterruptedCapacityAvoidTime makes the provider avoid the Spot
// offering of an interrupted instance for d (0: never).
func WithInterruptedCapacityAvoidTime(d time.Duration) Option {
	return func(p *Provider) {
		if d > 0 {
			p.avoid = &avoidance{ttl: d, until: map[offering]time.Time{}, groups: map[string]cloudprovider.AvoidedGroup{}}
		}
	}
}

var _ cloudprovider.CapacityAvoider = (*Provider)(nil)

// AvoidedGroups implements cloudprovider.CapacityAvoider from what the
// notices said; it does no I/O.
func (p *Provider) AvoidedGroups(now time.Time) []cloudprovider.AvoidedGroup {
	a := p.avoid
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for o, u := range a.until {
		if !now.Before(u) {
			delete(a.until, o)
		}
	}
	var out []cloudprovider.AvoidedGroup
	for id, g := range a.groups {
		if !now.Before(g.Until) {
			delete(a.groups, id)
			continue
		}
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out
}

// avoidInterrupted notes that the Spot offering of notice n's instance was
// interrupted, and avoids its group as a whole when every Spot offering of
// the group is (and the group cannot launch On-Demand). Only Spot
// interruption warnings count; a notice that names no instance type or
// zone, or a group not known, is skipped with a log line.
func (p *Provider) avoidInterrupted(ctx context.Context, n cloudprovider.InterruptionNotice) {
	a := p.avoid
	if a == nil || n.Kind != cloudprovider.SpotInterruption {
		return
	}
	logger := klog.FromContext(ctx)
	if n.InstanceType == "" || n.Zone == "" {
		logger.Info("Spot interruption: its capacity is not avoided, the notice names no instance type or zone",
			"instance", n.Instance, "nodeGroup", n.Group, "instanceType", n.InstanceType, "zone", n.Zone)
		return
	}
	g := p.current().groups[n.Group]
	if g == nil {
		logger.Info("Spot interruption: its capacity is not avoided, the node group is unknown", "instance", n.Instance, "nodeGroup", n.Group)
		return
	}
	now := p.clock.Now()
	interrupted := offering{group: n.Group, typ: n.InstanceType, zone: n.Zone}
	a.mu.Lock()
	a.until[interrupted] = now.Add(a.ttl)
	a.mu.Unlock()
	offerings, why := p.spotOfferings(ctx, &g.desc)
	a.mu.Lock()
	defer a.mu.Unlock()
	if why == "" {
		var until time.Time
		for _, o := range offerings {
			u, ok := a.until[o]
			if !ok || !now.Before(u) {
				why = fmt.Sprintf("its Spot offering %s in %s is not interrupted", o.typ, o.zone)
				break
			}
			if until.IsZero() || u.Before(until) {
				until = u
			}
		}
		if why == "" {
			a.groups[n.Group] = cloudprovider.AvoidedGroup{Group: n.Group, ErrorCode: SpotInterruptedCode, Until: until,
				ErrorMessage: fmt.Sprintf("Spot capacity of %s in %s was interrupted (instance %s); every Spot offering of the group (%s) is avoided until %s",
					n.InstanceType, n.Zone, lastSegment(n.Instance), offeringList(offerings), until.UTC().Format(time.RFC3339))}
			logger.Info("Spot interruption: node group avoided, every Spot offering of it was interrupted", "nodeGroup", n.Group,
				"instanceType", n.InstanceType, "zone", n.Zone, "until", until)
			return
		}
	}
	logger.Info("Spot interruption: offering avoided, its node group is not", "nodeGroup", n.Group, "instanceType", n.InstanceType,
		"zone", n.Zone, "until", a.until[interrupted], "why", why)
}

// spotOfferings are the Spot offerings of a group that launches Spot only
// (its instance types by its zones); why says, when it returns none, why
// the group is never avoided as a whole.
func (p *Provider) spotOfferings(ctx context.Context, d *groupDesc) ([]offering, string) {
	if c := p.groupCapacity(d); c != capacitySpot {
		return nil, fmt.Sprintf("it can launch On-Demand (capacity type %q)", string(c))
	}
	if len(d.MixedRequirements) > 0 {
		return nil, "it picks its instance types by attributes"
	}
	types := slices.Clone(d.MixedOverrides)
	if len(types) == 0 {
		t, err := p.launchInstanceType(ctx, d)
		if err != nil || t == "" {
			return nil, fmt.Sprintf("its instance type is unknown (%v)", err)
		}
		types = []string{t}
	}
	var zones []string
	for _, s := range d.Subnets {
		if z := p.facts.subnetZone(s); z != "" {
			zones = append(zones, z)
		}
	}
	if len(zones) == 0 {
		zones = slices.Clone(d.Zones)
	}
	if len(zones) == 0 {
		return nil, "its zones are unknown"
	}
	slices.Sort(types)
	slices.Sort(zones)
	var out []offering
	for _, t := range slices.Compact(types) {
		for _, z := range slices.Compact(zones) {
			out = append(out, offering{group: d.Name, typ: t, zone: z})
		}
	}
	return out, ""
}

func offeringList(os []offering) string {
	parts := make([]string, len(os))
	for i, o := range os {
		parts[i] = o.typ + " in " + o.zone
	}
	return strings.Join(parts, ", ")
}
