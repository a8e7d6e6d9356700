package aws

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// upstreamPolicy is the action list of upstream's recommended IAM policy
// for its AWS provider ("Full Cluster Autoscaler Features Policy" in
// cluster-autoscaler/cloudprovider/aws/README.md), both statements.
var upstreamPolicy = []string{
	"autoscaling:DescribeAutoScalingGroups",
	"autoscaling:DescribeAutoScalingInstances",
	"autoscaling:DescribeLaunchConfigurations",
	"autoscaling:DescribeScalingActivities",
	"ec2:DescribeImages",
	"ec2:DescribeInstanceTypes",
	"ec2:DescribeLaunchTemplateVersions",
	"ec2:GetInstanceTypesFromInstanceRequirements",
	"eks:DescribeNodegroup",
	"autoscaling:SetDesiredCapacity",
	"autoscaling:TerminateInstanceInAutoScalingGroup",
}

// logLines captures what a context's logger logs.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) ctx() context.Context {
	logger := funcr.New(func(prefix, args string) {
		l.mu.Lock()
		l.lines = append(l.lines, prefix+" "+args)
		l.mu.Unlock()
	}, funcr.Options{Verbosity: 2})
	return klog.NewContext(context.Background(), logger)
}

func (l *logLines) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.lines {
		if strings.Contains(s, substr) {
			n++
		}
	}
	return n
}

// TestUpstreamIAMPolicyScalesFromZero: with only the actions of upstream's
// documented policy (no ec2:DescribeSubnets, no
// autoscaling:SetInstanceProtection), a group at zero gets its template,
// in its first Availability Zone, and scales up; the refusal is logged
// once, and DescribeSubnets is tried again only after a while (once it is
// allowed, the first subnet's zone is used).
func TestUpstreamIAMPolicyScalesFromZero(t *testing.T) {
	s := startFake(t)
	refused := s.AllowOnly(upstreamPolicy...)
	if !slices.Contains(refused, "DescribeSubnets") || !slices.Contains(refused, "SetInstanceProtection") {
		t.Fatalf("upstream's policy refuses %v, want DescribeSubnets and SetInstanceProtection among them", refused)
	}
	g := groupOf("zero", 0)
	g.Subnets = []string{"subnet-b", "subnet-a"} // first subnet in us-east-1b; Availability Zones sorted: us-east-1a first
	s.AddGroup(g)
	clk := clocktesting.NewFakeClock(time.Now())
	p := newTestProvider(t, []string{"0:10:zero"}, nil, WithClock(clk))
	var logs logLines
	ctx := logs.ctx()

	for loop := range 3 {
		if err := p.Refresh(ctx); err != nil {
			t.Fatalf("loop %d: refresh: %v", loop, err)
		}
		info, err := group(t, p, "zero").TemplateNodeInfo(ctx)
		if err != nil {
			t.Fatalf("loop %d: template of a group at zero under upstream's policy: %v", loop, err)
		}
		if z := info.Node.Labels[apiv1.LabelTopologyZone]; z != "us-east-1a" {
			t.Errorf("loop %d: template zone %q, want the group's first Availability Zone us-east-1a", loop, z)
		}
		if it := info.Node.Labels[apiv1.LabelInstanceTypeStable]; it != "m5.large" {
			t.Errorf("loop %d: template instance type %q, want m5.large", loop, it)
		}
	}
	if n := s.Calls()["DescribeSubnets"]; n != 1 {
		t.Errorf("DescribeSubnets called %d times in 3 loops, want 1 (not again until the retry interval)", n)
	}
	if n := logs.count("DescribeSubnets refused by the IAM policy"); n != 1 {
		t.Errorf("the refusal logged %d times in 3 loops, want once", n)
	}
	if n := logs.count("Template zone taken from"); n != 1 {
		t.Errorf("the group's zone fallback logged %d times in 3 loops, want once", n)
	}

	if err := group(t, p, "zero").IncreaseSize(ctx, 1); err != nil {
		t.Fatalf("scale-up from zero under upstream's policy: %v", err)
	}
	refreshUntil(t, p, "one running instance", func() bool {
		running, _, _ := states(group(t, p, "zero").instances)
		return running == 1
	})

	// Granted later: used after the retry interval.
	s.Deny()
	clk.Step(subnetsRefusedRetry + time.Second)
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := group(t, p, "zero").TemplateNodeInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if z := info.Node.Labels[apiv1.LabelTopologyZone]; z != "us-east-1b" {
		t.Errorf("template zone %q once DescribeSubnets is allowed, want the first subnet's us-east-1b", z)
	}
}

// TestUpstreamIAMPolicyRefusesCancellingCapacity: without
// autoscaling:SetInstanceProtection (upstream's policy lacks it) the
// placeholders of failed launches are not cancelled: the error names the
// permission and the desired capacity stays.
func TestUpstreamIAMPolicyRefusesCancellingCapacity(t *testing.T) {
	s := startFake(t)
	s.AllowOnly(upstreamPolicy...)
	s.AddGroup(groupOf("ng", 1))
	s.FailLaunches("ng", "InsufficientInstanceCapacity", "We currently do not have sufficient m5.large capacity in the Availability Zone you requested (us-east-1a).")
	p := newTestProvider(t, []string{"0:10:ng"}, nil)
	ctx := context.Background()
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if err := group(t, p, "ng").IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	refreshUntil(t, p, "a failed placeholder", func() bool {
		_, _, failed := states(group(t, p, "ng").instances)
		return failed == 1
	})
	var victims []*apiv1.Node
	for _, in := range group(t, p, "ng").instances {
		if in.Status.ErrorInfo != nil {
			victims = append(victims, cloudprovider.InstanceNode(in.Id))
		}
	}
	err := group(t, p, "ng").DeleteNodes(ctx, victims)
	if err == nil || !strings.Contains(err.Error(), "autoscaling:SetInstanceProtection") {
		t.Fatalf("cancelling under upstream's policy: %v, want a refusal naming autoscaling:SetInstanceProtection", err)
	}
	if got := s.GroupState("ng").Desired; got != 2 {
		t.Errorf("desired %d, want 2 (nothing cancelled)", got)
	}
}
