package aws

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	clocktesting "k8s.io/utils/clock/testing"

	"k8s.io/autoscaler/cluster-autoscaler/test/awsfake"
)

// addCatalogue adds, to the fake of startFake (m5.large 2/8Gi, c5.xlarge
// 4/8Gi, g4dn.xlarge 4/16Gi + 1 T4), types that requirements choose among,
// and launch templates whose images are x86_64, arm64 and unknown to
// DescribeImages.
func addCatalogue(s *awsfake.Server) {
	s.AddInstanceType(awsfake.InstanceType{Name: "c5.large", VCPU: 2, MemoryMiB: 4096, Arch: "x86_64", MaxENIs: 3, IPv4PerENI: 10})
	s.AddInstanceType(awsfake.InstanceType{Name: "r5.large", VCPU: 2, MemoryMiB: 16384, Arch: "x86_64", MaxENIs: 3, IPv4PerENI: 10})
	s.AddInstanceType(awsfake.InstanceType{Name: "m5.xlarge", VCPU: 4, MemoryMiB: 16384, Arch: "x86_64", MaxENIs: 4, IPv4PerENI: 15})
	s.AddInstanceType(awsfake.InstanceType{Name: "t3.small", VCPU: 2, MemoryMiB: 2048, Arch: "x86_64", MaxENIs: 3, IPv4PerENI: 4, Burstable: true})
	s.AddInstanceType(awsfake.InstanceType{Name: "c6g.large", VCPU: 2, MemoryMiB: 4096, Arch: "arm64", MaxENIs: 3, IPv4PerENI: 10})
	s.AddInstanceType(awsfake.InstanceType{Name: "m6g.xlarge", VCPU: 4, MemoryMiB: 16384, Arch: "arm64", MaxENIs: 4, IPv4PerENI: 15})
	s.AddImage("ami-x86", "x86_64")
	s.AddImage("ami-arm", "arm64")
	s.AddLaunchTemplate(awsfake.LaunchTemplate{ID: "lt-x86", Name: "abs-x86", DefaultVersion: 1,
		Versions: []awsfake.LaunchTemplateVersion{{Number: 1, ImageID: "ami-x86"}}})
	s.AddLaunchTemplate(awsfake.LaunchTemplate{ID: "lt-arm", Name: "abs-arm", DefaultVersion: 1,
		Versions: []awsfake.LaunchTemplateVersion{{Number: 1, ImageID: "ami-arm"}}})
	s.AddLaunchTemplate(awsfake.LaunchTemplate{ID: "lt-unknown", Name: "abs-unknown", DefaultVersion: 1,
		Versions: []awsfake.LaunchTemplateVersion{{Number: 1, ImageID: "ami-not-described"}}})
}

// absGroup is a group at zero whose mixed-instances policy selects types
// by req, with the launch template ltID.
func absGroup(name, ltID string, req awsfake.InstanceRequirements) awsfake.Group {
	return awsfake.Group{Name: name, Max: 5, Subnets: []string{"subnet-a"}, MixedInstances: &awsfake.MixedInstancesPolicy{
		LaunchTemplate: awsfake.LaunchTemplateSpec{ID: ltID, Version: "$Default"}, Requirements: &req}}
}

func vcpuMem(vMin, vMax, memMin int) awsfake.InstanceRequirements {
	r := awsfake.InstanceRequirements{VCpuCount: awsfake.IntRange{Min: aws.Int(vMin)}, MemoryMiB: awsfake.IntRange{Min: aws.Int(memMin)}}
	if vMax > 0 {
		r.VCpuCount.Max = aws.Int(vMax)
	}
	return r
}

type templateFacts struct {
	Type, Arch string
	CPU, Mem   string
	GPUs       int64
}

func factsOf(n *apiv1.Node) templateFacts {
	c := n.Status.Capacity
	gpu := c[gpuResource]
	return templateFacts{Type: n.Labels[apiv1.LabelInstanceTypeStable], Arch: n.Labels[apiv1.LabelArchStable],
		CPU: c.Cpu().String(), Mem: c.Memory().String(), GPUs: gpu.Value()}
}

// TestRequirementsTemplateIsTheSmallestMatchingType: a group at zero whose
// policy selects types by their attributes gets the template of the
// smallest type AWS returns for its requirements and its image's
// architecture (by vCPUs, then memory); burstable types are out unless the
// requirements include them; the group's arch label tag decides without
// DescribeImages.
func TestRequirementsTemplateIsTheSmallestMatchingType(t *testing.T) {
	s := startFake(t)
	addCatalogue(s)
	burst := vcpuMem(2, 4, 1024)
	burst.BurstablePerformance = "included"
	gpu := vcpuMem(1, 0, 1024)
	gpu.AcceleratorCount = awsfake.IntRange{Min: aws.Int(1)}
	gpu.AcceleratorTypes, gpu.AcceleratorManufacturers = []string{"gpu"}, []string{"nvidia"}
	tagged := absGroup("tagged", "lt-unknown", vcpuMem(2, 4, 1024))
	tagged.Tags = map[string]string{LabelTagPrefix + "kubernetes.io/arch": "arm64"}
	for _, g := range []awsfake.Group{
		absGroup("x86", "lt-x86", vcpuMem(2, 4, 1024)),
		absGroup("arm", "lt-arm", vcpuMem(2, 4, 1024)),
		absGroup("burstable", "lt-x86", burst),
		absGroup("big", "lt-x86", vcpuMem(4, 8, 12288)),
		absGroup("gpu", "lt-x86", gpu),
		tagged,
	} {
		s.AddGroup(g)
	}
	p := newTestProvider(t, []string{"0:5:x86", "0:5:arm", "0:5:burstable", "0:5:big", "0:5:gpu", "0:5:tagged"}, nil)
	ctx := context.Background()
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]templateFacts{
		"x86":       {Type: "c5.large", Arch: "amd64", CPU: "2", Mem: "4Gi"},
		"arm":       {Type: "c6g.large", Arch: "arm64", CPU: "2", Mem: "4Gi"},
		"burstable": {Type: "t3.small", Arch: "amd64", CPU: "2", Mem: "2Gi"},
		"big":       {Type: "m5.xlarge", Arch: "amd64", CPU: "4", Mem: "16Gi"},
		"gpu":       {Type: "g4dn.xlarge", Arch: "amd64", CPU: "4", Mem: "16Gi", GPUs: 1},
		"tagged":    {Type: "c6g.large", Arch: "arm64", CPU: "2", Mem: "4Gi"},
	}
	for name, w := range want {
		info, err := group(t, p, name).TemplateNodeInfo(ctx)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got := factsOf(info.Node); got != w {
			t.Errorf("%s: template %+v, want %+v", name, got, w)
		}
	}
	// One image per template with an AMI (x86, arm), none for the group
	// whose label tag names its architecture.
	if n := s.Calls()["DescribeImages"]; n != 2 {
		t.Errorf("DescribeImages called %d times, want 2", n)
	}
}

// TestRequirementsAreReadOnce: the types of a set of requirements, their
// facts and the image's architecture are read once, not again in later
// loops within requirementsRefresh (requirements rarely change; a change is
// a new cache key).
func TestRequirementsAreReadOnce(t *testing.T) {
	s := startFake(t)
	addCatalogue(s)
	s.AddGroup(absGroup("a", "lt-x86", vcpuMem(2, 4, 1024)))
	s.AddGroup(absGroup("b", "lt-x86", vcpuMem(2, 4, 1024))) // the same requirements
	clk := clocktesting.NewFakeClock(time.Now())
	p := newTestProvider(t, []string{"0:5:a", "0:5:b"}, nil, WithClock(clk))
	ctx := context.Background()
	for loop := range 3 {
		if err := p.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"a", "b"} {
			info, err := group(t, p, name).TemplateNodeInfo(ctx)
			if err != nil {
				t.Fatalf("loop %d: %s: %v", loop, name, err)
			}
			if it := info.Node.Labels[apiv1.LabelInstanceTypeStable]; it != "c5.large" {
				t.Errorf("loop %d: %s: template type %q, want c5.large", loop, name, it)
			}
		}
	}
	calls := s.Calls()
	for action, want := range map[string]int{"GetInstanceTypesFromInstanceRequirements": 1, "DescribeInstanceTypes": 1, "DescribeImages": 1} {
		if calls[action] != want {
			t.Errorf("%s called %d times in 3 loops of 2 groups, want %d", action, calls[action], want)
		}
	}
	// New requirements (seen at the minute's read of every group): asked again.
	s.AddGroup(absGroup("a", "lt-x86", vcpuMem(4, 4, 1024)))
	clk.Step(DefaultListInterval)
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := group(t, p, "a").TemplateNodeInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := factsOf(info.Node); got.Type != "c5.xlarge" || s.Calls()["GetInstanceTypesFromInstanceRequirements"] != 2 {
		t.Errorf("after the requirements changed: template %+v, %d calls; want c5.xlarge and a second call", got,
			s.Calls()["GetInstanceTypesFromInstanceRequirements"])
	}
}

// TestRequirementsWithoutTypesHaveNoTemplate: requirements AWS has no type
// for give no template: an error that says so, wrapping errNoTypesMatch;
// the answer is cached like any other, and nothing panics.
func TestRequirementsWithoutTypesHaveNoTemplate(t *testing.T) {
	s := startFake(t)
	addCatalogue(s)
	s.AddGroup(absGroup("huge", "lt-x86", vcpuMem(128, 0, 1024)))
	s.AddGroup(absGroup("fine", "lt-x86", vcpuMem(2, 2, 1024)))
	p := newTestProvider(t, []string{"0:5:huge", "0:5:fine"}, nil)
	var logs logLines
	ctx := logs.ctx()
	for loop := range 2 {
		if err := p.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		info, err := group(t, p, "huge").TemplateNodeInfo(ctx)
		if err == nil || !errors.Is(err, errNoTypesMatch) || !strings.Contains(err.Error(), `"huge"`) {
			t.Fatalf("loop %d: template %v, error %v; want an error naming the group, wrapping errNoTypesMatch", loop, info, err)
		}
		if _, err := group(t, p, "fine").TemplateNodeInfo(ctx); err != nil {
			t.Errorf("loop %d: the other group: %v", loop, err)
		}
	}
	if n := logs.count(`"No instance type satisfies the instance requirements of an Auto Scaling group`); n != 1 {
		t.Errorf("the empty answer logged %d times in 2 loops, want once", n)
	}
	if n := s.Calls()["GetInstanceTypesFromInstanceRequirements"]; n != 2 {
		t.Errorf("GetInstanceTypesFromInstanceRequirements called %d times for two requirements in two loops, want 2", n)
	}
}

// TestSeveralOverridesTakeTheLeastOfEach: a policy with override types
// that disagree (r5.large: 2 vCPUs, 16Gi; c5.xlarge: 4 vCPUs, 8Gi) gets a
// template below both (2 vCPUs, 8Gi), named after the smallest by vCPUs,
// whatever the order of the overrides; with instances of the larger type
// running, the template stays the same.
func TestSeveralOverridesTakeTheLeastOfEach(t *testing.T) {
	s := startFake(t)
	addCatalogue(s)
	orders := map[string][]string{
		"forward":  {"r5.large", "c5.xlarge", "m5.xlarge"},
		"backward": {"m5.xlarge", "c5.xlarge", "r5.large"},
		"running":  {"c5.xlarge", "r5.large"}, // the fake launches the first override: c5.xlarge
	}
	var nodes []string
	for name, overrides := range orders {
		desired := 0
		if name == "running" {
			desired = 2
		}
		s.AddGroup(awsfake.Group{Name: name, Max: 5, Desired: desired, Subnets: []string{"subnet-a"}, MixedInstances: &awsfake.MixedInstancesPolicy{
			LaunchTemplate: awsfake.LaunchTemplateSpec{ID: "lt-0001", Version: "$Default"}, Overrides: overrides}})
		nodes = append(nodes, "0:5:"+name)
	}
	p := newTestProvider(t, nodes, nil)
	ctx := context.Background()
	refreshUntil(t, p, "two instances of the running group", func() bool {
		running, _, _ := states(group(t, p, "running").instances)
		return running == 2
	})
	want := templateFacts{Type: "r5.large", Arch: "amd64", CPU: "2", Mem: "8Gi"}
	for name := range orders {
		info, err := group(t, p, name).TemplateNodeInfo(ctx)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := factsOf(info.Node); got != want {
			t.Errorf("%s: template %+v, want %+v", name, got, want)
		}
		pods := info.Node.Status.Capacity[apiv1.ResourcePods]
		if pods.Cmp(resource.MustParse("29")) != 0 {
			t.Errorf("%s: pods %s, want 29 (the least of 29, 58, 58)", name, pods.String())
		}
	}
	for _, in := range s.Instances("running") {
		if in.InstanceType != "c5.xlarge" {
			t.Fatalf("the running group's instance %s is a %s; the test wants c5.xlarge instances", in.ID, in.InstanceType)
		}
	}
}

// TestRequirementsUnderRefusals: without
// ec2:GetInstanceTypesFromInstanceRequirements the template takes the
// requirements' minimum vCPUs and memory (no instance type label), which
// every type AWS may launch meets; the refusal is logged once and not
// asked again each loop. Without ec2:DescribeImages the types of both
// architectures are asked, and the template is the least of them,
// labelled amd64.
func TestRequirementsUnderRefusals(t *testing.T) {
	s := startFake(t)
	addCatalogue(s)
	s.AddGroup(absGroup("abs", "lt-x86", vcpuMem(2, 4, 3072)))
	s.Deny("GetInstanceTypesFromInstanceRequirements")
	p := newTestProvider(t, []string{"0:5:abs"}, nil)
	var logs logLines
	ctx := logs.ctx()
	for loop := range 3 {
		if err := p.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		info, err := group(t, p, "abs").TemplateNodeInfo(ctx)
		if err != nil {
			t.Fatalf("loop %d: %v", loop, err)
		}
		if got, want := factsOf(info.Node), (templateFacts{Arch: "amd64", CPU: "2", Mem: "3Gi"}); got != want {
			t.Errorf("loop %d: template %+v, want %+v", loop, got, want)
		}
	}
	if n := s.Calls()["GetInstanceTypesFromInstanceRequirements"]; n != 1 {
		t.Errorf("GetInstanceTypesFromInstanceRequirements called %d times in 3 loops, want 1", n)
	}
	if n := logs.count("GetInstanceTypesFromInstanceRequirements refused by the IAM policy"); n != 1 {
		t.Errorf("the refusal logged %d times, want once", n)
	}

	s.Deny("DescribeImages")
	p = newTestProvider(t, []string{"0:5:abs"}, nil)
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := group(t, p, "abs").TemplateNodeInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// x86_64: c5.large 2/4Gi, m5.large 2/8Gi, ...; arm64: c6g.large 2/4Gi.
	if got, want := factsOf(info.Node), (templateFacts{Type: "c5.large", Arch: "amd64", CPU: "2", Mem: "4Gi"}); got != want {
		t.Errorf("without DescribeImages: template %+v, want %+v", got, want)
	}
}

// TestMinimumTypeIgnoresOrderAndNeverExceedsAType: the pure rule, over
// every order of a set of types that disagree.
func TestMinimumTypeIgnoresOrderAndNeverExceedsAType(t *testing.T) {
	types := []instanceType{
		{Name: "g4dn.xlarge", VCPU: 4, MemoryMiB: 16384, Arch: "amd64", GPUs: 1, GPUManufacturer: "NVIDIA", GPUName: "T4", MaxPods: 29},
		{Name: "g5.xlarge", VCPU: 4, MemoryMiB: 16384, Arch: "amd64", GPUs: 1, GPUManufacturer: "NVIDIA", GPUName: "A10G", MaxPods: 58},
		{Name: "p3.8xlarge", VCPU: 32, MemoryMiB: 249856, Arch: "amd64", GPUs: 4, GPUManufacturer: "NVIDIA", GPUName: "V100"},
	}
	want := instanceType{Name: "g4dn.xlarge", VCPU: 4, MemoryMiB: 16384, Arch: "amd64", GPUs: 1, GPUManufacturer: "NVIDIA", MaxPods: 29,
		GPUModelsDiffer: true}
	perms := [][]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}
	for _, perm := range perms {
		in := []instanceType{types[perm[0]], types[perm[1]], types[perm[2]]}
		if got := minimumType(in); got != want {
			t.Errorf("order %v: %+v, want %+v", perm, got, want)
		}
	}
	// A type without GPUs among them: no GPU promised.
	got := minimumType(append(types, instanceType{Name: "m5.24xlarge", VCPU: 96, MemoryMiB: 393216, Arch: "amd64"}))
	if got.GPUs != 0 || got.GPUManufacturer != "" {
		t.Errorf("with a type without GPUs: %+v, want no GPU", got)
	}
	// Different GPU resources (NVIDIA, AMD): none promised.
	got = minimumType([]instanceType{types[0], {Name: "g4ad.xlarge", VCPU: 4, MemoryMiB: 16384, GPUs: 1, GPUManufacturer: "AMD", GPUName: "Radeon Pro V520"}})
	if got.GPUs != 0 {
		t.Errorf("NVIDIA and AMD types: %d GPUs promised, want 0", got.GPUs)
	}
}

// TestReplayRequirementsSeed: the fuzz seed with InstanceRequirements
// reaches the requirements path (its template is the least of the
// replayer's m5.large and g4dn.xlarge: no GPU).
func TestReplayRequirementsSeed(t *testing.T) {
	ctx := context.Background()
	p := replayProvider(&replayer{asgBody: seedASGRequirements(), typesBody: seedTypes})
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(group(t, p, "mixed").desc.MixedRequirements); n != 1 {
		t.Fatalf("%d requirement overrides read, want 1", n)
	}
	info, err := group(t, p, "mixed").TemplateNodeInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := factsOf(info.Node), (templateFacts{Type: "m5.large", Arch: "amd64", CPU: "2", Mem: "8Gi"}); got != want {
		t.Errorf("template %+v, want %+v", got, want)
	}
}

// TestRequirementsReadAgainAfterTheRefresh: the types of a set of
// requirements are asked again once requirementsRefresh has passed, so that
// a type AWS added since is seen; a refresh that fails (here IAM refuses it)
// keeps the types read before, and the template with them.
func TestRequirementsReadAgainAfterTheRefresh(t *testing.T) {
	s := startFake(t)
	addCatalogue(s)
	s.AddGroup(absGroup("a", "lt-x86", vcpuMem(2, 4, 1024)))
	clk := clocktesting.NewFakeClock(time.Now())
	p := newTestProvider(t, []string{"0:5:a"}, nil, WithClock(clk))
	ctx := context.Background()
	template := func(when string) string {
		t.Helper()
		if err := p.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		info, err := group(t, p, "a").TemplateNodeInfo(ctx)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		return info.Node.Labels[apiv1.LabelInstanceTypeStable]
	}
	if got := template("first read"); got != "c5.large" {
		t.Fatalf("template type %q, want c5.large", got)
	}
	s.AddInstanceType(awsfake.InstanceType{Name: "c7i.large", VCPU: 2, MemoryMiB: 3072, Arch: "x86_64", MaxENIs: 3, IPv4PerENI: 10})
	clk.Step(requirementsRefresh / 2)
	if got := template("half the refresh later"); got != "c5.large" ||
		s.Calls()["GetInstanceTypesFromInstanceRequirements"] != 1 {
		t.Errorf("before the refresh: template %q, %d calls; want c5.large from the first call",
			got, s.Calls()["GetInstanceTypesFromInstanceRequirements"])
	}
	clk.Step(requirementsRefresh)
	if got := template("after the refresh"); got != "c7i.large" ||
		s.Calls()["GetInstanceTypesFromInstanceRequirements"] != 2 {
		t.Errorf("after the refresh: template %q, %d calls; want c7i.large (added since) from a second call",
			got, s.Calls()["GetInstanceTypesFromInstanceRequirements"])
	}
	s.Deny("GetInstanceTypesFromInstanceRequirements")
	clk.Step(2 * requirementsRefresh)
	if got := template("refresh refused"); got != "c7i.large" ||
		s.Calls()["GetInstanceTypesFromInstanceRequirements"] != 3 {
		t.Errorf("refresh refused: template %q, %d calls; want c7i.large kept after a third, refused call",
			got, s.Calls()["GetInstanceTypesFromInstanceRequirements"])
	}
}
