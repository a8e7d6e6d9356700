package aws

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	clocktesting "k8s.io/utils/clock/testing"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/test/awsfake"
)

// The provider is tested through the real AWS SDK against the fake of the
// AWS APIs (test/awsfake), pointed at it by the SDK's own environment.

const waitFor = 30 * time.Second

func startFake(t *testing.T) *awsfake.Server { return startFakeTB(t) }

func startFakeTB(t testing.TB) *awsfake.Server {
	t.Helper()
	s := awsfake.New()
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	s.AddInstanceType(awsfake.InstanceType{Name: "m5.large", VCPU: 2, MemoryMiB: 8192, Arch: "x86_64", MaxENIs: 3, IPv4PerENI: 10})
	s.AddInstanceType(awsfake.InstanceType{Name: "c5.xlarge", VCPU: 4, MemoryMiB: 8192, Arch: "x86_64", MaxENIs: 4, IPv4PerENI: 15})
	s.AddInstanceType(awsfake.InstanceType{Name: "g4dn.xlarge", VCPU: 4, MemoryMiB: 16384, Arch: "x86_64", GPUs: 1,
		GPUManufacturer: "NVIDIA", GPUName: "T4", GPUMemoryMiB: 16384, MaxENIs: 3, IPv4PerENI: 10})
	s.AddSubnet("subnet-a", "us-east-1a")
	s.AddSubnet("subnet-b", "us-east-1b")
	s.AddLaunchTemplate(awsfake.LaunchTemplate{ID: "lt-0001", Name: "workers", DefaultVersion: 1,
		Versions: []awsfake.LaunchTemplateVersion{{Number: 1, InstanceType: "m5.large"}, {Number: 2, InstanceType: "c5.xlarge"}}})
	return s
}

func newTestProvider(t *testing.T, nodes, discovery []string, opts ...Option) *Provider {
	return newTestProviderTB(t, nodes, discovery, opts...)
}

func newTestProviderTB(t testing.TB, nodes, discovery []string, opts ...Option) *Provider {
	t.Helper()
	ctx := context.Background()
	explicit, err := parseNodeGroups(nodes)
	if err != nil {
		t.Fatal(err)
	}
	discover, err := parseDiscoverers(discovery)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a, e := newClients(cfg)
	return New(a, e, cfg.Region, explicit, discover, opts...)
}

func groupOf(name string, desired int) awsfake.Group {
	return awsfake.Group{Name: name, Max: 100, Desired: desired, LaunchTemplate: lt("$Default"), Subnets: []string{"subnet-a", "subnet-b"}}
}

func lt(version string) *awsfake.LaunchTemplateSpec {
	return &awsfake.LaunchTemplateSpec{ID: "lt-0001", Version: version}
}

func group(t *testing.T, p *Provider, name string) *NodeGroup {
	t.Helper()
	g := p.current().groups[name]
	if g == nil {
		t.Fatalf("no node group %q; have %v", name, p.current().order)
	}
	return g
}

// refreshUntil refreshes until cond holds of the provider.
func refreshUntil(t *testing.T, p *Provider, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		if err := p.Refresh(context.Background()); err != nil {
			t.Fatalf("refresh: %v", err)
		}
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func states(ins []cloudprovider.Instance) (running, creating, failed int) {
	for _, in := range ins {
		switch {
		case in.Status != nil && in.Status.ErrorInfo != nil:
			failed++
		case in.Status != nil && in.Status.State == cloudprovider.InstanceCreating:
			creating++
		case in.Status != nil && in.Status.State == cloudprovider.InstanceRunning:
			running++
		}
	}
	return
}

func TestDiscoveryAndExplicitGroups(t *testing.T) {
	s := startFake(t)
	tags := map[string]string{"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/prod": "owned"}
	s.AddGroup(awsfake.Group{Name: "auto-1", Min: 1, Max: 5, Desired: 1, LaunchTemplate: lt("$Default"), Subnets: []string{"subnet-a"}, Tags: tags})
	s.AddGroup(awsfake.Group{Name: "other-cluster", Min: 0, Max: 5, LaunchTemplate: lt("$Default"),
		Tags: map[string]string{"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/dev": "owned"}})
	s.AddGroup(awsfake.Group{Name: "team-ml", Min: 0, Max: 3, LaunchTemplate: lt("$Default"), Tags: map[string]string{"team": "ml"}})
	s.AddGroup(awsfake.Group{Name: "explicit", Min: 0, Max: 10, LaunchConfigurationName: "lc", Subnets: []string{"subnet-b"}})
	s.AddLaunchConfiguration(awsfake.LaunchConfiguration{Name: "lc", InstanceType: "c5.xlarge"})
	clk := clocktesting.NewFakeClock(time.Now())
	p := newTestProvider(t, []string{"2:4:explicit"},
		[]string{"asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/prod", "asg:tag=team=ml"}, WithClock(clk))
	if err := p.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	ngs, _ := p.NodeGroups(context.Background())
	var got []string
	for _, ng := range ngs {
		got = append(got, fmt.Sprintf("%s:%d:%d", ng.Id(), ng.MinSize(), ng.MaxSize()))
	}
	want := []string{"auto-1:1:5", "explicit:2:4", "team-ml:0:3"}
	if !slices.Equal(got, want) {
		t.Fatalf("node groups %v, want %v", got, want)
	}

	// The list, and with it every group, is read again only after a
	// minute; steady groups are not read in between.
	s.AddGroup(awsfake.Group{Name: "auto-2", Min: 0, Max: 5, LaunchTemplate: lt("$Default"), Tags: tags})
	before := s.Calls()["DescribeAutoScalingGroups"]
	if err := p.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := s.Calls()["DescribeAutoScalingGroups"] - before; n != 0 {
		t.Errorf("a Refresh within the minute made %d DescribeAutoScalingGroups calls, want 0 (every group steady)", n)
	}
	if len(p.current().order) != 3 {
		t.Errorf("the group list changed within the minute: %v", p.current().order)
	}
	clk.Step(DefaultListInterval)
	before = s.Calls()["DescribeAutoScalingGroups"]
	if err := p.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(p.current().order, "auto-2") {
		t.Errorf("a new tagged group is not listed after a minute: %v", p.current().order)
	}
	// One call per discoverer (its answer describes the groups it finds),
	// one for the --nodes group.
	if n := s.Calls()["DescribeAutoScalingGroups"] - before; n != 3 {
		t.Errorf("the minute's full read made %d DescribeAutoScalingGroups calls, want 3", n)
	}
	if g := group(t, p, "explicit"); g.MinSize() != 2 || g.MaxSize() != 4 {
		t.Errorf("the --nodes group after a full read: min %d max %d, want 2, 4", g.MinSize(), g.MaxSize())
	}
}

func TestScaleUpPlaceholdersAndInstances(t *testing.T) {
	s := startFake(t)
	s.SetStartDelay(time.Hour) // instances stay Pending
	s.AddGroup(awsfake.Group{Name: "ng", Min: 0, Max: 3, LaunchTemplate: lt("$Latest"), Subnets: []string{"subnet-a", "subnet-b"}})
	p := newTestProvider(t, []string{"0:3:ng"}, nil)
	ctx := context.Background()
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	ng := group(t, p, "ng")
	if err := ng.IncreaseSize(ctx, 4); err == nil {
		t.Fatal("an increase above max was accepted")
	}
	if got := s.GroupState("ng").Desired; got != 0 {
		t.Fatalf("desired %d after a refused increase", got)
	}
	if err := ng.IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if got := s.GroupState("ng").Desired; got != 2 {
		t.Fatalf("desired %d, want 2", got)
	}
	refreshUntil(t, p, "two pending instances", func() bool {
		_, creating, _ := states(group(t, p, "ng").instances)
		return creating == 2 && len(s.Instances("ng")) == 2
	})
	ng = group(t, p, "ng")
	ins, _ := ng.Nodes(ctx)
	for _, in := range ins {
		if isPlaceholder(lastSegment(in.Id)) {
			t.Errorf("placeholder %s while every instance exists", in.Id)
		}
		if !strings.HasPrefix(in.Id, "aws:///us-east-1") {
			t.Errorf("provider id %q, want aws:///<zone>/<id>", in.Id)
		}
		node := &apiv1.Node{Spec: apiv1.NodeSpec{ProviderID: in.Id}}
		if g, _ := p.NodeGroupForNode(ctx, node); g == nil || g.Id() != "ng" {
			t.Errorf("NodeGroupForNode(%s) = %v", in.Id, g)
		}
	}
	if n, _ := ng.TargetSize(ctx); n != 2 {
		t.Errorf("target %d, want 2", n)
	}
	other := &apiv1.Node{Spec: apiv1.NodeSpec{ProviderID: "aws:///us-east-1a/i-00000000000000000"}}
	if g, _ := p.NodeGroupForNode(ctx, other); g != nil {
		t.Errorf("an unknown instance is in group %s", g.Id())
	}
	if _, err := p.HasInstance(ctx, other); !errors.Is(err, cloudprovider.ErrNotImplemented) {
		t.Errorf("HasInstance of an unknown instance: %v, want ErrNotImplemented", err)
	}
}

func TestFailedLaunchBecomesOutOfResourcesPlaceholders(t *testing.T) {
	s := startFake(t)
	s.AddGroup(awsfake.Group{Name: "ng", Min: 0, Max: 5, LaunchTemplate: lt("$Default"), Subnets: []string{"subnet-a"}})
	s.FailLaunches("ng", "InsufficientInstanceCapacity", "We currently do not have sufficient m5.large capacity")
	p := newTestProvider(t, []string{"0:5:ng"}, nil)
	ctx := context.Background()
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if err := group(t, p, "ng").IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	refreshUntil(t, p, "failed placeholders", func() bool {
		_, _, failed := states(group(t, p, "ng").instances)
		return failed == 2
	})
	ng := group(t, p, "ng")
	for _, in := range ng.instances {
		ei := in.Status.ErrorInfo
		if ei.ErrorClass != cloudprovider.OutOfResourcesErrorClass || ei.ErrorCode != "InsufficientInstanceCapacity" {
			t.Errorf("placeholder %s: error %+v, want out-of-resources InsufficientInstanceCapacity", in.Id, ei)
		}
	}
	// The core deletes failed placeholders: the desired capacity drops,
	// no instance is terminated.
	var victims []*apiv1.Node
	for _, in := range ng.instances {
		victims = append(victims, cloudprovider.InstanceNode(in.Id))
	}
	if err := ng.DeleteNodes(ctx, victims); err != nil {
		t.Fatal(err)
	}
	if st := s.GroupState("ng"); st.Desired != 0 {
		t.Errorf("desired %d after deleting the placeholders, want 0", st.Desired)
	}
	if n := len(s.Terminated()); n != 0 {
		t.Errorf("%d instances terminated for placeholders", n)
	}
}

func TestDeleteNodesAndDecrease(t *testing.T) {
	s := startFake(t)
	s.AddGroup(awsfake.Group{Name: "ng", Min: 1, Max: 5, Desired: 3, LaunchTemplate: lt("$Default"), Subnets: []string{"subnet-a"}})
	s.AddGroup(awsfake.Group{Name: "other", Min: 0, Max: 5, Desired: 1, LaunchTemplate: lt("$Default"), Subnets: []string{"subnet-b"}})
	p := newTestProvider(t, []string{"1:5:ng", "0:5:other"}, nil)
	ctx := context.Background()
	refreshUntil(t, p, "running instances", func() bool {
		r1, _, _ := states(group(t, p, "ng").instances)
		r2, _, _ := states(group(t, p, "other").instances)
		return r1 == 3 && r2 == 1
	})
	ng, other := group(t, p, "ng"), group(t, p, "other")
	node := func(in cloudprovider.Instance) *apiv1.Node { return cloudprovider.InstanceNode(in.Id) }
	if err := ng.DeleteNodes(ctx, []*apiv1.Node{node(other.instances[0])}); err == nil {
		t.Fatal("deleting an instance of another group was accepted")
	}
	if err := ng.DeleteNodes(ctx, []*apiv1.Node{node(ng.instances[0]), node(ng.instances[1]), node(ng.instances[2])}); err == nil {
		t.Fatal("deleting below min was accepted")
	}
	if n := len(s.Terminated()); n != 0 {
		t.Fatalf("%d instances terminated by refused deletions", n)
	}
	if err := ng.DecreaseTargetSize(ctx, -1); err == nil {
		t.Fatal("a decrease below the instances was accepted")
	}
	victim := lastSegment(ng.instances[1].Id)
	if err := ng.DeleteNodes(ctx, []*apiv1.Node{node(ng.instances[1])}); err != nil {
		t.Fatal(err)
	}
	if got := s.Terminated(); !slices.Equal(got, []string{victim}) {
		t.Errorf("terminated %v, want exactly %s", got, victim)
	}
	if st := s.GroupState("ng"); st.Desired != 2 {
		t.Errorf("desired %d, want 2", st.Desired)
	}
}

func TestTemplates(t *testing.T) {
	s := startFake(t)
	s.AddLaunchConfiguration(awsfake.LaunchConfiguration{Name: "lc", InstanceType: "g4dn.xlarge"})
	s.AddLaunchTemplate(awsfake.LaunchTemplate{ID: "lt-0002", Name: "by-name", DefaultVersion: 1,
		Versions: []awsfake.LaunchTemplateVersion{{Number: 1, InstanceType: "c5.xlarge"}}})
	s.AddGroup(awsfake.Group{Name: "default", Max: 3, LaunchTemplate: lt("$Default"), Subnets: []string{"subnet-b", "subnet-a"},
		Tags: map[string]string{LabelTagPrefix + "team": "ml", TaintTagPrefix + "dedicated": "ml:NoSchedule"}})
	s.AddGroup(awsfake.Group{Name: "latest", Max: 3, LaunchTemplate: lt("$Latest"), Subnets: []string{"subnet-a"}})
	s.AddGroup(awsfake.Group{Name: "numbered", Max: 3, LaunchTemplate: lt("1"), Subnets: []string{"subnet-a"}})
	s.AddGroup(awsfake.Group{Name: "named", Max: 3, LaunchTemplate: &awsfake.LaunchTemplateSpec{Name: "by-name"}, Subnets: []string{"subnet-a"}})
	s.AddGroup(awsfake.Group{Name: "config", Max: 3, LaunchConfigurationName: "lc", Subnets: []string{"subnet-a"}})
	s.AddGroup(awsfake.Group{Name: "mixed", Max: 3, Subnets: []string{"subnet-a"}, MixedInstances: &awsfake.MixedInstancesPolicy{
		LaunchTemplate: awsfake.LaunchTemplateSpec{ID: "lt-0001", Version: "$Default"}, Overrides: []string{"g4dn.xlarge", "m5.large"}}})
	p := newTestProvider(t, []string{"0:3:default", "0:3:latest", "0:3:numbered", "0:3:named", "0:3:config", "0:3:mixed"}, nil)
	ctx := context.Background()
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		group, instanceType, zone string
		gpus                      int64
	}{
		{"default", "m5.large", "us-east-1b", 0},
		{"latest", "c5.xlarge", "us-east-1a", 0},
		{"numbered", "m5.large", "us-east-1a", 0},
		{"named", "c5.xlarge", "us-east-1a", 0},
		{"config", "g4dn.xlarge", "us-east-1a", 1},
		// Overrides g4dn.xlarge and m5.large: the group may launch either,
		// so the template promises neither the GPU nor the 4 vCPUs.
		{"mixed", "m5.large", "us-east-1a", 0},
	}
	for _, tc := range cases {
		t.Run(tc.group, func(t *testing.T) {
			info, err := group(t, p, tc.group).TemplateNodeInfo(ctx)
			if err != nil {
				t.Fatal(err)
			}
			n := info.Node
			if got := n.Labels[apiv1.LabelInstanceTypeStable]; got != tc.instanceType {
				t.Errorf("instance type %q, want %q", got, tc.instanceType)
			}
			if got := n.Labels[apiv1.LabelTopologyZone]; got != tc.zone {
				t.Errorf("zone %q, want %q", got, tc.zone)
			}
			gpu := n.Status.Capacity[gpuResource]
			if gpu.Value() != tc.gpus {
				t.Errorf("GPUs %d, want %d", gpu.Value(), tc.gpus)
			}
			if tc.gpus > 0 && n.Labels[GPULabel] == "" {
				t.Errorf("no %s label on a GPU template", GPULabel)
			}
		})
	}
	n, _ := group(t, p, "default").TemplateNodeInfo(ctx)
	if n.Node.Labels["team"] != "ml" || len(n.Node.Spec.Taints) != 1 {
		t.Errorf("tags not applied: labels %v taints %v", n.Node.Labels, n.Node.Spec.Taints)
	}
	pods := n.Node.Status.Capacity[apiv1.ResourcePods]
	if pods.Cmp(resource.MustParse("29")) != 0 {
		t.Errorf("pods %s, want 29 (3 ENIs * 9 + 2)", pods.String())
	}
	// Instance types are read once.
	before := s.Calls()["DescribeInstanceTypes"]
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		if _, err := group(t, p, tc.group).TemplateNodeInfo(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if d := s.Calls()["DescribeInstanceTypes"] - before; d != 0 {
		t.Errorf("%d DescribeInstanceTypes calls for types already read", d)
	}
	opts, err := group(t, p, "default").GetOptions(ctx, config.NodeGroupAutoscalingOptions{})
	if err != nil || opts != nil {
		t.Errorf("GetOptions without option tags = %v, %v; want nil, nil", opts, err)
	}
}

func TestBatchingAndThrottling(t *testing.T) {
	s := startFake(t)
	var nodes []string
	for i := range 120 {
		name := fmt.Sprintf("ng-%03d", i)
		s.AddGroup(awsfake.Group{Name: name, Max: 10, Desired: 1, LaunchTemplate: lt("$Default"), Subnets: []string{"subnet-a"}})
		nodes = append(nodes, "0:10:"+name)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	p := newTestProvider(t, nodes, nil, WithClock(clk))
	ctx := context.Background()
	refreshUntil(t, p, "every instance", func() bool { return len(p.current().byInstance) == 120 })
	const describe = "DescribeAutoScalingGroups"
	before, retriedBefore := s.Calls()[describe], s.Retries()[describe]
	clk.Step(DefaultListInterval)
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	// The SDK may retry a call whose connection failed on a loaded machine
	// (seen once in CI); the batching is about the calls made, not retried.
	retried := s.Retries()[describe] - retriedBefore
	if n := s.Calls()[describe] - before - retried; n != 2 {
		t.Errorf("%d DescribeAutoScalingGroups calls (and %d retries) for 120 groups, want 2 (100 per call)", n, retried)
	}
	s.SetThrottle(30)
	for range 4 {
		clk.Step(DefaultListInterval) // each a full read
		if err := p.Refresh(ctx); err != nil {
			t.Fatalf("refresh at 30%% throttling: %v", err)
		}
		if n := len(p.current().order); n != 120 {
			t.Fatalf("%d groups at 30%% throttling, want 120", n)
		}
	}
	if s.Throttled() == 0 {
		t.Error("the fake throttled nothing")
	}
	if s.Retries()[describe] == retriedBefore+retried {
		t.Error("the fake saw no retry of a throttled call (is the SDK's amz-sdk-request header read?)")
	}
	if err := group(t, p, "ng-000").IncreaseSize(ctx, 1); err != nil {
		t.Fatalf("increase at 30%% throttling: %v", err)
	}
}

func TestCallErrorClassifiesThrottling(t *testing.T) {
	s := startFake(t)
	s.AddGroup(awsfake.Group{Name: "ng", Max: 3, LaunchTemplate: lt("$Default")})
	t.Setenv("AWS_MAX_ATTEMPTS", "1")
	p := newTestProvider(t, []string{"0:3:ng"}, nil)
	s.SetThrottle(100)
	err := p.Refresh(context.Background())
	if err == nil || !cloudprovider.IsTransient(err) {
		t.Fatalf("refresh fully throttled: %v, want a transient error", err)
	}
}
