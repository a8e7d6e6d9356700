package aws

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	apiv1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"k8s.io/autoscaler/cluster-autoscaler/test/awsfake"
)

// driftSetup starts the fake and a provider on a fake clock for the named
// groups; the caller adds the groups.
func driftSetup(t *testing.T, nodes []string) (*awsfake.Server, *Provider, *clocktesting.FakeClock, *ec2.Client) {
	t.Helper()
	s := startFake(t)
	s.AddLaunchConfiguration(awsfake.LaunchConfiguration{Name: "lc-a", InstanceType: "m5.large"})
	s.AddLaunchConfiguration(awsfake.LaunchConfiguration{Name: "lc-b", InstanceType: "m5.large"})
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC))
	p := newTestProvider(t, nodes, nil, WithClock(clk))
	cfg, err := loadConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s, p, clk, ec2.NewFromConfig(cfg)
}

// nodesOf returns a Node per launched instance of the group.
func nodesOf(t *testing.T, p *Provider, name string) []*apiv1.Node {
	t.Helper()
	ins, err := group(t, p, name).Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []*apiv1.Node
	for _, in := range ins {
		if isPlaceholder(lastSegment(in.Id)) {
			continue
		}
		n := &apiv1.Node{}
		n.Name, n.Spec.ProviderID = lastSegment(in.Id), in.Id
		out = append(out, n)
	}
	return out
}

// launched refreshes until the group lists n launched instances.
func launched(t *testing.T, p *Provider, clk *clocktesting.FakeClock, name string, n int) {
	t.Helper()
	refreshUntil(t, p, name+" instances", func() bool {
		clk.Step(2 * time.Minute) // every Refresh a full read
		return len(p.current().groups[name].desc.Instances) == n && len(nodesOf(t, p, name)) == n
	})
}

// driftOfNodes asks the group about each node: the reasons of the drifted
// ones by node name; an error fails the test.
func driftOfNodes(t *testing.T, p *Provider, name string) map[string]string {
	t.Helper()
	out := map[string]string{}
	g := group(t, p, name)
	for _, n := range nodesOf(t, p, name) {
		d, why, err := g.Drifted(context.Background(), n)
		if err != nil {
			t.Fatalf("Drifted(%s): %v", n.Name, err)
		}
		if d {
			out[n.Name] = why
		}
	}
	return out
}

// TestDriftLatestVersion: under $Latest, a new template version makes the
// instances of the older one drifted (once the kept version numbers are
// read again, at most a minute later); an instance launched from a version
// created after the numbers were read is not taken for drifted.
func TestDriftLatestVersion(t *testing.T) {
	s, p, clk, ec2c := driftSetup(t, []string{"0:5:latest"})
	s.AddGroup(awsfake.Group{Name: "latest", Max: 5, Desired: 2, LaunchTemplate: lt("$Latest"), Subnets: []string{"subnet-a"}})
	launched(t, p, clk, "latest", 2)
	if d := driftOfNodes(t, p, "latest"); len(d) != 0 {
		t.Fatalf("drifted before any change: %v", d)
	}
	newVersion := func() {
		t.Helper()
		if _, err := ec2c.CreateLaunchTemplateVersion(context.Background(), &ec2.CreateLaunchTemplateVersionInput{
			LaunchTemplateId: aws.String("lt-0001"), SourceVersion: aws.String("$Latest"),
			LaunchTemplateData: &ec2types.RequestLaunchTemplateData{}}); err != nil {
			t.Fatal(err)
		}
	}
	newVersion() // 3
	old := map[string]bool{}
	for _, n := range nodesOf(t, p, "latest") {
		old[n.Name] = true
	}
	// Within the minute the kept numbers stand: not drifted yet.
	if d := driftOfNodes(t, p, "latest"); len(d) != 0 {
		t.Errorf("drifted with version numbers kept from before: %v", d)
	}
	clk.Step(launchTTL)
	d := driftOfNodes(t, p, "latest")
	if len(d) != 2 {
		t.Fatalf("drifted %v, want both instances", d)
	}
	for n, why := range d {
		if !strings.Contains(why, "lt-0001 version 2, now 3 ($Latest)") {
			t.Errorf("%s: why %q", n, why)
		}
	}

	// Version 4 appears after the numbers were read (they say 3); an
	// instance launched from it is not drifted, the old ones are.
	newVersion()
	if err := group(t, p, "latest").IncreaseSize(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	refreshUntil(t, p, "the third instance", func() bool { return len(nodesOf(t, p, "latest")) == 3 })
	d = driftOfNodes(t, p, "latest")
	for _, n := range nodesOf(t, p, "latest") {
		if old[n.Name] != (d[n.Name] != "") {
			t.Errorf("%s (old %v): drifted %q", n.Name, old[n.Name], d[n.Name])
		}
	}
}

// TestDriftDefaultAndNumberedVersions: a new default version drifts the
// instances of a $Default group; a group pinned to a number drifts when the
// group is changed to another number, with no DescribeLaunchTemplates call.
func TestDriftDefaultAndNumberedVersions(t *testing.T) {
	s, p, clk, ec2c := driftSetup(t, []string{"0:5:default", "0:5:pinned"})
	s.AddGroup(awsfake.Group{Name: "default", Max: 5, Desired: 1, LaunchTemplate: lt("$Default"), Subnets: []string{"subnet-a"}})
	s.AddGroup(awsfake.Group{Name: "pinned", Max: 5, Desired: 1, LaunchTemplate: lt("1"), Subnets: []string{"subnet-a"}})
	launched(t, p, clk, "default", 1)
	launched(t, p, clk, "pinned", 1)
	before := s.Calls()["DescribeLaunchTemplates"]
	if d := driftOfNodes(t, p, "pinned"); len(d) != 0 {
		t.Fatalf("pinned drifted before any change: %v", d)
	}
	if n := s.Calls()["DescribeLaunchTemplates"] - before; n != 0 {
		t.Errorf("%d DescribeLaunchTemplates calls for a numbered version", n)
	}
	if d := driftOfNodes(t, p, "default"); len(d) != 0 {
		t.Fatalf("default drifted before any change: %v", d)
	}
	if _, err := ec2c.ModifyLaunchTemplate(context.Background(), &ec2.ModifyLaunchTemplateInput{LaunchTemplateId: aws.String("lt-0001"),
		DefaultVersion: aws.String("2")}); err != nil {
		t.Fatal(err)
	}
	s.AddGroup(awsfake.Group{Name: "pinned", Max: 5, Desired: 1, LaunchTemplate: lt("2"), Subnets: []string{"subnet-a"}})
	clk.Step(launchTTL)
	if err := p.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"default": "version 1, now 2 ($Default)", "pinned": "version 1, now 2"} {
		d := driftOfNodes(t, p, name)
		if len(d) != 1 {
			t.Errorf("%s: drifted %v, want its instance", name, d)
		}
		for _, why := range d {
			if !strings.HasSuffix(why, want) {
				t.Errorf("%s: why %q, want it to end with %q", name, why, want)
			}
		}
	}
}

// TestDriftLaunchConfigurationAndMixedTypes: a group's other launch
// configuration, a switch from a configuration to a template, and an
// instance type no longer among a mixed-instances policy's overrides drift
// the instances; a policy change that keeps the type does not.
func TestDriftLaunchConfigurationAndMixedTypes(t *testing.T) {
	s, p, clk, _ := driftSetup(t, []string{"0:5:lc", "0:5:switch", "0:5:mixed"})
	s.AddGroup(awsfake.Group{Name: "lc", Max: 5, Desired: 1, LaunchConfigurationName: "lc-a", Subnets: []string{"subnet-a"}})
	s.AddGroup(awsfake.Group{Name: "switch", Max: 5, Desired: 1, LaunchConfigurationName: "lc-a", Subnets: []string{"subnet-a"}})
	mixed := func(overrides ...string) awsfake.Group {
		return awsfake.Group{Name: "mixed", Max: 5, Desired: 1, Subnets: []string{"subnet-a"}, MixedInstances: &awsfake.MixedInstancesPolicy{
			LaunchTemplate: awsfake.LaunchTemplateSpec{ID: "lt-0001", Version: "1"}, Overrides: overrides}}
	}
	s.AddGroup(mixed("m5.large", "c5.xlarge")) // launches m5.large
	for _, g := range []string{"lc", "switch", "mixed"} {
		launched(t, p, clk, g, 1)
		if d := driftOfNodes(t, p, g); len(d) != 0 {
			t.Fatalf("%s drifted before any change: %v", g, d)
		}
	}
	s.AddGroup(awsfake.Group{Name: "lc", Max: 5, Desired: 1, LaunchConfigurationName: "lc-b", Subnets: []string{"subnet-a"}})
	s.AddGroup(awsfake.Group{Name: "switch", Max: 5, Desired: 1, LaunchTemplate: lt("1"), Subnets: []string{"subnet-a"}})
	s.AddGroup(mixed("c5.xlarge", "m5.large")) // the type stays allowed
	clk.Step(2 * time.Minute)
	if err := p.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := driftOfNodes(t, p, "mixed"); len(d) != 0 {
		t.Errorf("mixed drifted with its type still an override: %v", d)
	}
	s.AddGroup(mixed("c5.xlarge", "g4dn.xlarge"))
	clk.Step(2 * time.Minute)
	if err := p.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"lc": "launch configuration lc-a, now lc-b",
		"switch": "launch configuration lc-a, now launch template lt-0001@1",
		"mixed":  "instance type m5.large, no longer among the overrides [c5.xlarge g4dn.xlarge]"} {
		d := driftOfNodes(t, p, name)
		if len(d) != 1 {
			t.Errorf("%s: drifted %v, want its instance", name, d)
		}
		for _, why := range d {
			if why != want {
				t.Errorf("%s: why %q, want %q", name, why, want)
			}
		}
	}
}

// TestDriftUnsureAndUpstreamPolicy: a node the group does not list and a
// placeholder are not drifted, with an error; a template that is gone is
// not drifted either; under upstream's IAM policy (no
// ec2:DescribeLaunchTemplates) the version numbers come from
// DescribeLaunchTemplateVersions.
func TestDriftUnsureAndUpstreamPolicy(t *testing.T) {
	s, p, clk, ec2c := driftSetup(t, []string{"0:5:ng"})
	s.AllowOnly(upstreamPolicy...)
	s.AddGroup(awsfake.Group{Name: "ng", Max: 5, Desired: 1, LaunchTemplate: lt("$Latest"), Subnets: []string{"subnet-a"}})
	launched(t, p, clk, "ng", 1)
	g := group(t, p, "ng")
	ctx := context.Background()
	for name, n := range map[string]*apiv1.Node{
		"another group's instance": {Spec: apiv1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0123456789abcdef0"}},
		"a placeholder":            {Spec: apiv1.NodeSpec{ProviderID: providerID("us-east-1a", placeholderID("ng", 0))}},
		"not AWS":                  {Spec: apiv1.NodeSpec{ProviderID: "kwok://x"}},
	} {
		if d, _, err := g.Drifted(ctx, n); d || err == nil {
			t.Errorf("%s: drifted %v, err %v; want not drifted, with an error", name, d, err)
		}
	}
	if d := driftOfNodes(t, p, "ng"); len(d) != 0 {
		t.Fatalf("drifted before any change: %v", d)
	}
	if n := s.Calls()["DescribeLaunchTemplateVersions"]; n == 0 {
		t.Error("no DescribeLaunchTemplateVersions call under upstream's policy")
	}
	s.AllowOnly(append(upstreamPolicy, "ec2:CreateLaunchTemplateVersion")...)
	if _, err := ec2c.CreateLaunchTemplateVersion(ctx, &ec2.CreateLaunchTemplateVersionInput{LaunchTemplateId: aws.String("lt-0001"),
		SourceVersion: aws.String("2"), LaunchTemplateData: &ec2types.RequestLaunchTemplateData{}}); err != nil {
		t.Fatal(err)
	}
	clk.Step(launchTTL)
	if d := driftOfNodes(t, p, "ng"); len(d) != 1 {
		t.Errorf("drifted %v under upstream's policy, want the instance", d)
	}

	// The template is gone: unsure, not drifted.
	s.Deny()
	s.AddLaunchTemplate(awsfake.LaunchTemplate{ID: "lt-0001", Name: "workers", DefaultVersion: 1}) // no versions left
	clk.Step(describeTemplatesRefusedRetry)
	n := nodesOf(t, p, "ng")[0]
	if d, why, err := g.Drifted(ctx, n); d {
		t.Errorf("drifted (%q, %v) with a template AWS cannot resolve", why, err)
	}
}

// TestDriftAPICalls measures the calls Drifted adds: ten minutes of loops
// at a 10 s scan interval over 100 groups ($Default of one template, 180
// instances), every instance asked each loop, nothing changing. Drifted
// makes no Auto Scaling call (it reads the kept descriptions) and one
// DescribeLaunchTemplates call per minute (the kept version numbers'
// lifetime) for all the groups' templates; none for numbered versions.
func TestDriftAPICalls(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 100 groups on the fake")
	}
	s, p, clk := callsSetup(t, 100)
	ctx := context.Background()
	steady := runDriftLoops(t, s, p, clk, 60, nil)
	steady.check(t, "steady")
	for _, d := range steady.drifted {
		if d != 0 {
			t.Fatalf("steady: %v drifted a loop; nothing changed", steady.drifted)
		}
	}

	// The template's default version moves to 2; each loop one group gets
	// a new instance (from version 2). Every old instance is drifted once
	// the kept numbers are read again; no new one ever is.
	old := map[string]bool{}
	for id := range p.current().byInstance {
		old[id] = true
	}
	if _, err := ec2.NewFromConfig(mustConfig(t)).ModifyLaunchTemplate(ctx, &ec2.ModifyLaunchTemplateInput{
		LaunchTemplateId: aws.String("lt-0001"), DefaultVersion: aws.String("2")}); err != nil {
		t.Fatal(err)
	}
	rolling := runDriftLoops(t, s, p, clk, 12, func(i int, g *NodeGroup, id string, drifted bool) {
		if drifted != old[id] {
			if !old[id] || i >= 6 { // the kept numbers may stand for a minute
				t.Errorf("loop %d: instance %s (old %v) drifted %v", i, id, old[id], drifted)
			}
		}
	})
	rolling.check(t, "rolling")
}

func mustConfig(t *testing.T) aws.Config {
	t.Helper()
	cfg, err := loadConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// driftRun is what a run of loops asking every instance cost.
type driftRun struct {
	loops, asked int
	calls        map[string]int // by action, made by Drifted
	drifted      []int          // per loop
}

func (r driftRun) check(t *testing.T, what string) {
	t.Helper()
	minutes := float64(r.loops) * scanInterval.Seconds() / 60
	t.Logf("%s: %d loops (%.0f minutes), %d Drifted calls: API calls made by Drifted %v (%.1f a minute); drifted per loop %v",
		what, r.loops, minutes, r.asked, r.calls, float64(r.calls["DescribeLaunchTemplates"])/minutes, r.drifted)
	if got, limit := r.calls["DescribeLaunchTemplates"], int(minutes)+1; got > limit || got == 0 {
		t.Errorf("%s: %d DescribeLaunchTemplates calls, want between 1 and %d (one a minute)", what, got, limit)
	}
	for action, n := range r.calls {
		if action != "DescribeLaunchTemplates" {
			t.Errorf("%s: Drifted made %d %s calls, want none", what, n, action)
		}
	}
}

// runDriftLoops runs loops of Refresh then Drifted for every launched
// instance; with each (not nil), each loop also scales one group up by one
// and each answer is passed to it.
func runDriftLoops(t *testing.T, s *awsfake.Server, p *Provider, clk *clocktesting.FakeClock, loops int,
	each func(loop int, g *NodeGroup, id string, drifted bool)) driftRun {
	t.Helper()
	ctx := context.Background()
	r := driftRun{loops: loops, calls: map[string]int{}}
	for i := range loops {
		clk.Step(scanInterval)
		if err := p.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		groups, _ := p.NodeGroups(ctx)
		before := s.Calls()
		drifted := 0
		for _, ng := range groups {
			g := ng.(*NodeGroup)
			for _, in := range g.instances {
				id := lastSegment(in.Id)
				if isPlaceholder(id) {
					continue
				}
				n := &apiv1.Node{}
				n.Name, n.Spec.ProviderID = id, in.Id
				d, why, err := g.Drifted(ctx, n)
				if err != nil {
					t.Fatalf("loop %d: %s: %v", i, id, err)
				}
				if d {
					drifted++
					if !strings.Contains(why, "version 1, now 2 ($Default)") {
						t.Errorf("loop %d: %s: why %q", i, id, why)
					}
				}
				if each != nil {
					each(i, g, id, d)
				}
				r.asked++
			}
		}
		for action, n := range s.Calls() {
			if n -= before[action]; n > 0 {
				r.calls[action] += n
			}
		}
		r.drifted = append(r.drifted, drifted)
		if each != nil {
			if err := groups[(i*7+1)%len(groups)].IncreaseSize(ctx, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	return r
}
