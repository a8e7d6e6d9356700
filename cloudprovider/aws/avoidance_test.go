package aws

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/test/awsfake"
)

// avoidanceProvider reads queue "interruptions" with an avoid time of ttl
// over: spot-a (Spot only, m5.large in us-east-1a), spot-ab (Spot only,
// m5.large in both zones), half (half On-Demand above the base), and
// spot-lt (a Spot launch template, m5.large in both zones), each with one
// instance per zone it has.
func avoidanceProvider(t *testing.T, ttl time.Duration) (*awsfake.Server, *Provider) {
	t.Helper()
	s := startFake(t)
	addSpotTemplate(s)
	s.CreateQueue("interruptions")
	s.AddGroup(mixedGroup("spot-a", 1, 0, percent(0)))
	ab := mixedGroup("spot-ab", 2, 0, percent(0))
	ab.Subnets = []string{"subnet-a", "subnet-b"}
	s.AddGroup(ab)
	s.AddGroup(mixedGroup("half", 1, 0, percent(50)))
	s.AddGroup(awsfake.Group{Name: "spot-lt", Max: 10, Desired: 2, Subnets: []string{"subnet-a", "subnet-b"},
		LaunchTemplate: &awsfake.LaunchTemplateSpec{ID: "lt-spot", Version: "$Default"}})
	cfg, err := loadConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p := newTestProvider(t, []string{"0:10:spot-a", "0:10:spot-ab", "0:10:half", "0:10:spot-lt"}, nil,
		WithInterruptionQueue(newSQSClient(cfg, cloudConfig{}), "interruptions", false), WithInterruptedCapacityAvoidTime(ttl))
	refreshUntil(t, p, "every instance", func() bool {
		return len(s.Instances("spot-a")) == 1 && len(s.Instances("spot-ab")) == 2 && len(s.Instances("half")) == 1 &&
			len(s.Instances("spot-lt")) == 2 && len(group(t, p, "spot-lt").desc.Instances) == 2 &&
			len(group(t, p, "spot-ab").desc.Instances) == 2 && len(group(t, p, "spot-a").desc.Instances) == 1
	})
	// The templates (and so the launch template's market) are read as
	// the scale-up reads them.
	for _, name := range []string{"spot-a", "spot-ab", "half", "spot-lt"} {
		if _, err := group(t, p, name).TemplateNodeInfo(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return s, p
}

// interrupt sends a Spot interruption warning for the instance of group in
// zone and polls it.
func interrupt(t *testing.T, s *awsfake.Server, p *Provider, name, zone string) {
	t.Helper()
	for _, in := range s.Instances(name) {
		if in.Zone == zone {
			s.SendSpotInterruption("interruptions", in.ID)
			if pending, _ := poll(t, p); len(pending) == 0 {
				t.Fatalf("the notice for %s was not taken", in.ID)
			}
			return
		}
	}
	t.Fatalf("group %s has no instance in %s", name, zone)
}

func avoidedIDs(p *Provider, now time.Time) map[string]cloudprovider.AvoidedGroup {
	out := map[string]cloudprovider.AvoidedGroup{}
	for _, g := range p.AvoidedGroups(now) {
		out[g.Group] = g
	}
	return out
}

// TestSpotInterruptionAvoidsAGroupOnlyWhenAllItsSpotOfferingsAre: a Spot
// interruption warning makes its (group, type, zone) offering out of
// capacity for the avoid time; a group is avoided, with code
// SpotInterrupted and a message naming the type and zone, only once every
// Spot offering of it is, and only when it cannot launch On-Demand.
func TestSpotInterruptionAvoidsAGroupOnlyWhenAllItsSpotOfferingsAre(t *testing.T) {
	const ttl = 10 * time.Minute
	s, p := avoidanceProvider(t, ttl)
	start := time.Now()
	interrupt(t, s, p, "spot-a", "us-east-1a")
	interrupt(t, s, p, "spot-ab", "us-east-1a")
	interrupt(t, s, p, "half", "us-east-1a")
	interrupt(t, s, p, "spot-lt", "us-east-1b")
	got := avoidedIDs(p, time.Now())
	if len(got) != 1 {
		t.Fatalf("avoided %v, want spot-a only (the others have a Spot offering left or launch On-Demand)", got)
	}
	a := got["spot-a"]
	if a.ErrorCode != SpotInterruptedCode || !strings.Contains(a.ErrorMessage, "m5.large in us-east-1a") ||
		a.Until.Before(start.Add(ttl)) || a.Until.After(time.Now().Add(ttl)) {
		t.Errorf("spot-a avoided as %+v, want SpotInterrupted naming m5.large in us-east-1a, until the notice plus %v", a, ttl)
	}
	// The launch-template Spot group's other zone goes too: now all of it.
	interrupt(t, s, p, "spot-lt", "us-east-1a")
	if lt, ok := avoidedIDs(p, time.Now())["spot-lt"]; !ok || !strings.Contains(lt.ErrorMessage, "m5.large in us-east-1a, m5.large in us-east-1b") {
		t.Errorf("spot-lt avoided %v (%+v), want both its offerings named", ok, lt)
	}
	if _, ok := avoidedIDs(p, time.Now())["half"]; ok {
		t.Error("a group that can launch On-Demand was avoided")
	}
	// After the avoid time nothing is avoided.
	if later := p.AvoidedGroups(time.Now().Add(ttl)); len(later) != 0 {
		t.Errorf("avoided after the avoid time: %+v", later)
	}
}

// TestSpotAvoidanceSkipsBadNoticesAndCanBeOff: a notice without a type or
// zone, or for a group the provider does not know, only skips the
// avoidance; other kinds of notices never avoid; an avoid time of 0
// turns it off.
func TestSpotAvoidanceSkipsBadNoticesAndCanBeOff(t *testing.T) {
	_, p := avoidanceProvider(t, time.Minute)
	ctx := context.Background()
	spot := func(group, typ, zone string) cloudprovider.InterruptionNotice {
		return cloudprovider.InterruptionNotice{Kind: cloudprovider.SpotInterruption, Instance: "aws:///us-east-1a/i-0", Group: group,
			InstanceType: typ, Zone: zone}
	}
	p.avoidInterrupted(ctx, spot("spot-a", "", "us-east-1a"))
	p.avoidInterrupted(ctx, spot("spot-a", "m5.large", ""))
	p.avoidInterrupted(ctx, spot("no-such-group", "m5.large", "us-east-1a"))
	rebalance := spot("spot-a", "m5.large", "us-east-1a")
	rebalance.Kind = cloudprovider.Rebalance
	p.avoidInterrupted(ctx, rebalance)
	if got := p.AvoidedGroups(time.Now()); len(got) != 0 {
		t.Errorf("avoided %+v after bad or non-Spot notices, want none", got)
	}
	p.avoidInterrupted(ctx, spot("spot-a", "m5.large", "us-east-1a"))
	if got := p.AvoidedGroups(time.Now()); len(got) != 1 {
		t.Errorf("avoided %+v after a good notice, want spot-a", got)
	}

	off := newTestProvider(t, []string{"0:10:spot-a"}, nil, WithInterruptedCapacityAvoidTime(0))
	refreshUntil(t, off, "spot-a", func() bool { return len(group(t, off, "spot-a").desc.Instances) == 1 })
	off.avoidInterrupted(ctx, spot("spot-a", "m5.large", "us-east-1a"))
	if got := off.AvoidedGroups(time.Now()); got != nil {
		t.Errorf("avoided %+v with an avoid time of 0", got)
	}
}
