package aws

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// describeBatch is how many groups one DescribeAutoScalingGroups names: AWS
// takes up to 50 names, or up to MaxRecords (at most 100) when that is set.
const describeBatch = describePage

// describePage is the MaxRecords of a DescribeAutoScalingGroups call.
const describePage = 100

// maxPages bounds the pages of one paginated call: a server that keeps
// sending new tokens is not followed for ever.
const maxPages = 1000

func stopOnDuplicateToken(o *autoscaling.DescribeAutoScalingGroupsPaginatorOptions) {
	o.StopOnDuplicateToken = true
}

// activityRecords is how many scaling activities are read for a group.
const activityRecords = 5

// activitySlack is how much earlier than this process's last increase a
// failed activity may have started and still be taken for its failure:
// AWS stamps activities to the second, and on its own clock.
const activitySlack = 2 * time.Second

// snapshot is the state of the groups read by one Refresh.
type snapshot struct {
	order      []string
	groups     map[string]*NodeGroup
	byInstance map[string]*NodeGroup // instance or placeholder id -> group
}

// discoverGroups reads the groups every discoverer's tags select (each
// discoverer's filtered calls, every page), with their descriptions.
func (p *Provider) discoverGroups(ctx context.Context) (map[string]groupDesc, error) {
	found := map[string]groupDesc{}
	for _, d := range p.discover {
		in := &autoscaling.DescribeAutoScalingGroupsInput{Filters: d.filters(), MaxRecords: aws.Int32(describePage)}
		pages := autoscaling.NewDescribeAutoScalingGroupsPaginator(p.asg, in, stopOnDuplicateToken)
		for n := 0; pages.HasMorePages(); n++ {
			if n >= maxPages {
				return nil, badDescription("discovering Auto Scaling groups: more than %d pages", maxPages)
			}
			out, err := pages.NextPage(ctx)
			if err != nil {
				return nil, callError("discovering Auto Scaling groups by tags", err, true)
			}
			for _, a := range out.AutoScalingGroups {
				g, err := describeGroup(a)
				if err != nil {
					klog.FromContext(ctx).Error(err, "Leaving out an Auto Scaling group AWS described badly")
					continue
				}
				if d.matches(g.Tags) {
					found[g.Name] = g
				}
			}
		}
	}
	return found, nil
}

// describeGroups reads the named groups, describeBatch names per call,
// every page of each. Groups AWS does not know are left out (with a log).
func (p *Provider) describeGroups(ctx context.Context, names []string) (map[string]groupDesc, error) {
	out := make(map[string]groupDesc, len(names))
	for start := 0; start < len(names); start += describeBatch {
		batch := names[start:min(start+describeBatch, len(names))]
		in := &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: batch, MaxRecords: aws.Int32(describePage)}
		pages := autoscaling.NewDescribeAutoScalingGroupsPaginator(p.asg, in, stopOnDuplicateToken)
		for n := 0; pages.HasMorePages(); n++ {
			if n >= maxPages {
				return nil, badDescription("describing Auto Scaling groups: more than %d pages", maxPages)
			}
			page, err := pages.NextPage(ctx)
			if err != nil {
				return nil, callError(fmt.Sprintf("describing %d Auto Scaling groups", len(batch)), err, true)
			}
			p.addDescriptions(ctx, out, page.AutoScalingGroups)
		}
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			klog.FromContext(ctx).Error(nil, "Auto Scaling group not found; left out", "nodeGroup", n)
		}
	}
	return out, nil
}

func (p *Provider) addDescriptions(ctx context.Context, out map[string]groupDesc, groups []astypes.AutoScalingGroup) {
	for _, a := range groups {
		g, err := describeGroup(a)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Leaving out an Auto Scaling group AWS described badly")
			continue
		}
		out[g.Name] = g
	}
}

// describeOne reads one group afresh (before a change to it), in a call
// filled with the kept groups read longest ago (pad); the read is kept for
// the groups it covers (keepFresh). When the group's own read could not be
// kept, or it is gone, the next Refresh reads it.
func (p *Provider) describeOne(ctx context.Context, name string) (groupDesc, error) {
	names := []string{name}
	if p.refreshMu.TryLock() {
		names = p.pad(names, nil)
		p.refreshMu.Unlock()
	}
	gens := p.writeGens(names)
	start, seq := p.clock.Now(), p.seq.Add(1)
	descs, err := p.describeGroups(ctx, names)
	if err != nil {
		p.invalidate(name)
		return groupDesc{}, err
	}
	kept := p.keepFresh(start, seq, names, descs, gens)
	g, ok := descs[name]
	if !ok {
		p.invalidate(name)
		return groupDesc{}, fmt.Errorf("group %q: %w", name, errGroupGone)
	}
	if !kept[name] {
		p.invalidate(name)
	}
	return g, nil
}

// buildSnapshot makes the node groups of the cached groups: bounds from
// --nodes where given, placeholders for capacity not launched, with the
// failure of the latest scaling activity when it failed after the last
// increase. The activities of the groups just read (read) whose capacity
// is not all launched are read again when due.
func (p *Provider) buildSnapshot(ctx context.Context, now time.Time, read map[string]groupDesc) (*snapshot, error) {
	bounds := map[string]explicitGroup{}
	for _, e := range p.explicit {
		bounds[e.Name] = e
	}
	s := &snapshot{groups: map[string]*NodeGroup{}, byInstance: map[string]*NodeGroup{}}
	names := p.cachedNames()
	reserved := p.reservedGroups(now) // reservations.go
	var subnets []string
	for _, c := range p.cache {
		subnets = append(subnets, c.desc.Subnets...)
	}
	if err := p.loadSubnets(ctx, subnets); err != nil && !errors.Is(err, errSubnetsRefused) {
		// Placeholders and templates fall back to the groups' zones (a
		// refusal by IAM is logged once, by loadSubnets).
		klog.FromContext(ctx).Error(err, "Reading the zones of the Auto Scaling groups' subnets")
	}
	for _, n := range names {
		c := p.cache[n]
		d := c.desc
		min, max := d.Min, d.Max
		if e, ok := bounds[n]; ok {
			min, max = effectiveBounds(ctx, e, d)
			if min > max {
				continue
			}
		}
		g := &NodeGroup{p: p, desc: d, readAt: c.readAt, seq: c.seq, min: min, max: max}
		if r, ok := reserved[n]; ok {
			g.reservation = &r
			g.max = reservedMax(max, d.Desired, g.reservation)
		}
		if d.Desired > d.live() {
			if _, justRead := read[n]; justRead && p.activityDue(c, now) {
				a, err := p.readLatestActivity(ctx, n)
				if err != nil {
					return nil, err
				}
				c.activity, c.activityAt = a, now
			}
			g.failure = p.failureSinceIncrease(n, c.activity)
		}
		g.instances = g.buildInstances()
		s.order = append(s.order, n)
		s.groups[n] = g
		for _, in := range g.instances {
			s.byInstance[lastSegment(in.Id)] = g
		}
	}
	return s, nil
}

// activityDue reports whether the group's scaling activities are to be
// read again: never read, read activityEvery ago, raised since, or raised
// lately and still short (every raisedEvery).
func (p *Provider) activityDue(c *cachedGroup, now time.Time) bool {
	if c.activityAt.IsZero() || now.Sub(c.activityAt) >= activityEvery {
		return true
	}
	if p.raisedShort(c, now) && now.Sub(c.activityAt) >= raisedEvery {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.increased[c.desc.Name].Before(c.activityAt)
}

// effectiveBounds intersects the --nodes bounds with the group's own: AWS
// refuses a desired capacity outside the group's.
func effectiveBounds(ctx context.Context, e explicitGroup, d groupDesc) (int, int) {
	lo, hi := max(e.Min, d.Min), min(e.Max, d.Max)
	if lo != e.Min || hi != e.Max {
		klog.FromContext(ctx).V(2).Info("--nodes bounds narrowed to the Auto Scaling group's", "nodeGroup", e.Name,
			"flagMin", e.Min, "flagMax", e.Max, "asgMin", d.Min, "asgMax", d.Max)
	}
	if lo > hi {
		klog.FromContext(ctx).Error(nil, "--nodes bounds do not meet the Auto Scaling group's; group left out", "nodeGroup", e.Name,
			"flagMin", e.Min, "flagMax", e.Max, "asgMin", d.Min, "asgMax", d.Max)
	}
	return lo, hi
}

// latestActivity is a group's latest scaling activity: when it started,
// and its failure when it failed.
type latestActivity struct {
	start   time.Time
	failure *launchFailure
}

// readLatestActivity reads the group's latest scaling activity; nil when
// it has none.
func (p *Provider) readLatestActivity(ctx context.Context, name string) (*latestActivity, error) {
	out, err := p.asg.DescribeScalingActivities(ctx, &autoscaling.DescribeScalingActivitiesInput{
		AutoScalingGroupName: aws.String(name), MaxRecords: aws.Int32(activityRecords)})
	if err != nil {
		return nil, callError(fmt.Sprintf("reading the scaling activities of Auto Scaling group %q", name), err, true)
	}
	var latest *astypes.Activity
	for i := range out.Activities {
		a := &out.Activities[i]
		if latest == nil || deref(a.StartTime).After(deref(latest.StartTime)) {
			latest = a
		}
	}
	if latest == nil {
		return nil, nil
	}
	la := &latestActivity{start: deref(latest.StartTime)}
	if latest.StatusCode == astypes.ScalingActivityStatusCodeFailed {
		f := classifyLaunchFailure(deref(latest.StatusMessage) + " " + deref(latest.Description))
		f.Message = deref(latest.StatusMessage)
		la.failure = &f
	}
	return la, nil
}

// failureSinceIncrease returns the failure of the group's latest activity
// when it started no earlier than this process's last increase of the
// group (AWS stamps activities to the second, on its own clock).
func (p *Provider) failureSinceIncrease(name string, a *latestActivity) *launchFailure {
	if a == nil || a.failure == nil {
		return nil
	}
	p.mu.Lock()
	since := p.increased[name]
	p.mu.Unlock()
	if !since.IsZero() && a.start.Before(since.Add(-activitySlack)) {
		return nil
	}
	return a.failure
}

// noteIncrease records when the group's desired capacity was raised.
func (p *Provider) noteIncrease(name string, at time.Time) {
	p.mu.Lock()
	p.increased[name] = at
	p.mu.Unlock()
}

// buildInstances lists the group's instances and its placeholders.
func (g *NodeGroup) buildInstances() []cloudprovider.Instance {
	d := &g.desc
	out := make([]cloudprovider.Instance, 0, max(d.Desired, len(d.Instances)))
	for _, in := range d.Instances {
		st := &cloudprovider.InstanceStatus{State: cloudprovider.InstanceRunning}
		switch {
		case in.terminating():
			st.State = cloudprovider.InstanceDeleting
		case in.pending():
			st.State = cloudprovider.InstanceCreating
		}
		out = append(out, cloudprovider.Instance{Id: providerID(in.Zone, in.ID), Status: st})
	}
	zone := d.defaultZone(g.p.facts.subnetZone)
	for n := 0; n < d.Desired-d.live(); n++ {
		st := &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating}
		if f := g.failure; f != nil {
			st.ErrorInfo = &cloudprovider.InstanceErrorInfo{ErrorClass: f.Class, ErrorCode: f.Code, ErrorMessage: f.Message}
		}
		out = append(out, cloudprovider.Instance{Id: providerID(zone, placeholderID(d.Name, n)), Status: st})
	}
	return out
}

func lastSegment(id string) string {
	for i := len(id) - 1; i >= 0; i-- {
		if id[i] == '/' {
			return id[i+1:]
		}
	}
	return id
}
