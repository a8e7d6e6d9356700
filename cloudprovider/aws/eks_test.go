package aws

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"k8s.io/autoscaler/cluster-autoscaler/test/awsfake"
)

// The EKS managed node group behind an Auto Scaling group, read with
// DescribeNodegroup through the SDK's EKS client against the fake.

// newEKSTestProvider is newTestProvider with the SDK's EKS client, built
// from the same configuration (AWS_ENDPOINT_URL_EKS points it at the fake).
func newEKSTestProvider(t *testing.T, nodes []string, opts ...Option) *Provider {
	t.Helper()
	cfg, err := loadConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return newTestProvider(t, nodes, nil, append(opts, WithEKS(newEKSClient(cfg, cloudConfig{})))...)
}

// TestManagedNodegroupThroughCloudConfigOverride: an eks [ServiceOverride]
// of --cloud-config for the provider's region sends DescribeNodegroup to
// its URL (AWS_ENDPOINT_URL_EKS points nowhere); one of another region is
// not applied.
func TestManagedNodegroupThroughCloudConfigOverride(t *testing.T) {
	s := startFake(t)
	s.AddGroup(eksGroup("eks-ng-0001", "prod", "ng", nil))
	s.AddNodegroup(awsfake.EKSNodegroup{Cluster: "prod", Name: "ng", Labels: map[string]string{"team": "ml"}})
	t.Setenv("AWS_ENDPOINT_URL_EKS", "http://127.0.0.1:1")
	t.Setenv("AWS_MAX_ATTEMPTS", "1")
	cfg, err := loadConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		region string
		want   bool
	}{{cfg.Region, true}, {"eu-west-1", false}} {
		cc := cloudConfig{Overrides: []serviceOverride{{Name: "1", Service: "eks", Region: c.region, URL: s.URL(), SigningRegion: cfg.Region}}}
		p := newTestProvider(t, []string{"0:10:eks-ng-0001"}, nil, WithEKS(newEKSClient(cfg, cc)))
		n := template(t, context.Background(), p, "eks-ng-0001")
		if got := n.Labels["team"] == "ml"; got != c.want {
			t.Errorf("override for %s: node group label read = %v, want %v (labels %v)", c.region, got, c.want, n.Labels)
		}
	}
}

// eksGroup is a group at zero tagged as EKS tags a managed node group's
// Auto Scaling group, plus extra tags.
func eksGroup(name, cluster, nodegroup string, extra map[string]string) awsfake.Group {
	g := groupOf(name, 0)
	g.Tags = map[string]string{EKSClusterTag: cluster, EKSNodegroupTag: nodegroup}
	for k, v := range extra {
		g.Tags[k] = v
	}
	return g
}

// template refreshes and returns the group's template node.
func template(t *testing.T, ctx context.Context, p *Provider, name string) *apiv1.Node {
	t.Helper()
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := group(t, p, name).TemplateNodeInfo(ctx)
	if err != nil {
		t.Fatalf("template of %s: %v", name, err)
	}
	return info.Node
}

func taintStrings(ts []apiv1.Taint) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.ToString())
	}
	return out
}

// TestManagedNodegroupLabelsAndTaints: a group at zero of an EKS managed
// node group gets eks.amazonaws.com/nodegroup, eks.amazonaws.com/capacityType
// and the node group's labels and taints, effects spelt the Kubernetes way.
func TestManagedNodegroupLabelsAndTaints(t *testing.T) {
	s := startFake(t)
	s.AddGroup(eksGroup("eks-gpu-0001", "prod", "gpu", nil))
	s.AddNodegroup(awsfake.EKSNodegroup{Cluster: "prod", Name: "gpu", CapacityType: "SPOT", AutoScalingGroups: []string{"eks-gpu-0001"},
		Labels: map[string]string{"team": "ml", "example.com/tier": "gold"},
		Taints: []awsfake.EKSTaint{{Key: "dedicated", Value: "ml", Effect: "NO_SCHEDULE"},
			{Key: "example.com/evict", Effect: "NO_EXECUTE"}, {Key: "spot", Value: "true", Effect: "PREFER_NO_SCHEDULE"}}})
	p := newEKSTestProvider(t, []string{"0:10:eks-gpu-0001"})
	n := template(t, context.Background(), p, "eks-gpu-0001")
	for k, want := range map[string]string{EKSNodegroupLabel: "gpu", EKSCapacityTypeLabel: "SPOT", "team": "ml", "example.com/tier": "gold",
		apiv1.LabelInstanceTypeStable: "m5.large"} {
		if got, ok := n.Labels[k]; !ok || got != want {
			t.Errorf("label %s = %q (set: %v), want %q", k, got, ok, want)
		}
	}
	want := []string{"dedicated=ml:NoSchedule", "example.com/evict:NoExecute", "spot=true:PreferNoSchedule"}
	if d := cmp.Diff(want, taintStrings(n.Spec.Taints)); d != "" {
		t.Errorf("taints (-want +got):\n%s", d)
	}
	if got := s.Calls()["DescribeNodegroup"]; got != 1 {
		t.Errorf("DescribeNodegroup called %d times, want 1", got)
	}

	// An on-demand node group without labels or taints.
	s.AddGroup(eksGroup("eks-plain-0001", "prod", "plain", nil))
	s.AddNodegroup(awsfake.EKSNodegroup{Cluster: "prod", Name: "plain"})
	p = newEKSTestProvider(t, []string{"0:10:eks-plain-0001"})
	n = template(t, context.Background(), p, "eks-plain-0001")
	if n.Labels[EKSNodegroupLabel] != "plain" || n.Labels[EKSCapacityTypeLabel] != "ON_DEMAND" || len(n.Spec.Taints) != 0 {
		t.Errorf("plain node group: labels %v taints %v, want nodegroup=plain, capacityType=ON_DEMAND, no taint", n.Labels, n.Spec.Taints)
	}
}

// TestManagedNodegroupTagsOverride: the group's node-template tags win over
// the node group: a label tag replaces the node group's label of its key, a
// taint tag the node group's taint of its key and effect (a taint of the
// same key with another effect stays); the node group's labels never
// replace the labels the provider derives itself (instance type, arch...).
func TestManagedNodegroupTagsOverride(t *testing.T) {
	s := startFake(t)
	s.AddGroup(eksGroup("eks-ng-0001", "prod", "ng", map[string]string{
		LabelTagPrefix + "team": "web", LabelTagPrefix + EKSCapacityTypeLabel: "ON_DEMAND",
		TaintTagPrefix + "dedicated": "web:NoSchedule"}))
	s.AddNodegroup(awsfake.EKSNodegroup{Cluster: "prod", Name: "ng", CapacityType: "SPOT",
		Labels: map[string]string{"team": "ml", "zone": "blue", apiv1.LabelArchStable: "arm64"},
		Taints: []awsfake.EKSTaint{{Key: "dedicated", Value: "ml", Effect: "NO_SCHEDULE"}, {Key: "dedicated", Value: "ml", Effect: "NO_EXECUTE"}}})
	p := newEKSTestProvider(t, []string{"0:10:eks-ng-0001"})
	n := template(t, context.Background(), p, "eks-ng-0001")
	for k, want := range map[string]string{"team": "web", EKSCapacityTypeLabel: "ON_DEMAND", "zone": "blue", EKSNodegroupLabel: "ng",
		apiv1.LabelArchStable: "amd64"} {
		if got := n.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	want := []string{"dedicated=web:NoSchedule", "dedicated=ml:NoExecute"}
	if d := cmp.Diff(want, taintStrings(n.Spec.Taints)); d != "" {
		t.Errorf("taints (-want +got):\n%s", d)
	}
}

// TestManagedNodegroupBadReplyEntriesSkipped: labels and taints EKS answers
// that Kubernetes would refuse (bad key or value, empty taint key, unknown
// effect) are left out, each with a log line; the rest is kept.
func TestManagedNodegroupBadReplyEntriesSkipped(t *testing.T) {
	s := startFake(t)
	s.AddGroup(eksGroup("eks-bad-0001", "prod", "bad", nil))
	s.AddNodegroup(awsfake.EKSNodegroup{Cluster: "prod", Name: "bad", CapacityType: "SOME TYPE",
		Labels: map[string]string{"good": "yes", "bad key": "x", "badvalue": "a b", "": "empty"},
		Taints: []awsfake.EKSTaint{{Key: "ok", Value: "1", Effect: "NO_SCHEDULE"}, {Key: "never", Effect: "NEVER"},
			{Key: "", Value: "v", Effect: "NO_SCHEDULE"}, {Key: "lower", Effect: "NoSchedule"}, {Key: "bad value", Effect: "NO_EXECUTE"}}})
	p := newEKSTestProvider(t, []string{"0:10:eks-bad-0001"})
	var logs logLines
	n := template(t, logs.ctx(), p, "eks-bad-0001")
	if n.Labels["good"] != "yes" || n.Labels[EKSNodegroupLabel] != "bad" {
		t.Errorf("labels %v, want good=yes and the node group label", n.Labels)
	}
	for _, k := range []string{"bad key", "badvalue", "", EKSCapacityTypeLabel} {
		if v, ok := n.Labels[k]; ok {
			t.Errorf("label %q=%q taken from a bad reply", k, v)
		}
	}
	if d := cmp.Diff([]string{"ok=1:NoSchedule"}, taintStrings(n.Spec.Taints)); d != "" {
		t.Errorf("taints (-want +got):\n%s", d)
	}
	if got := logs.count("Ignoring a label of the managed node group"); got != 3 {
		t.Errorf("%d label lines logged, want 3", got)
	}
	if got := logs.count("Ignoring a taint of the managed node group"); got != 4 {
		t.Errorf("%d taint lines logged, want 4", got)
	}
	if got := logs.count("Ignoring the managed node group's capacity type"); got != 1 {
		t.Errorf("%d capacity type lines logged, want 1", got)
	}
}

// TestManagedNodegroupCached: templates within the cache's time to live
// make no second DescribeNodegroup call (one call for many loops); after
// it the node group is read again and a change is seen.
func TestManagedNodegroupCached(t *testing.T) {
	s := startFake(t)
	s.AddGroup(eksGroup("eks-ng-0001", "prod", "ng", nil))
	s.AddNodegroup(awsfake.EKSNodegroup{Cluster: "prod", Name: "ng", Labels: map[string]string{"team": "ml"}})
	clk := clocktesting.NewFakeClock(time.Now())
	p := newEKSTestProvider(t, []string{"0:10:eks-ng-0001"}, WithClock(clk))
	ctx := context.Background()
	for loop := range 5 {
		if n := template(t, ctx, p, "eks-ng-0001"); n.Labels["team"] != "ml" {
			t.Fatalf("loop %d: team=%q, want ml", loop, n.Labels["team"])
		}
		clk.Step(time.Minute)
	}
	if got := s.Calls()["DescribeNodegroup"]; got != 1 {
		t.Errorf("DescribeNodegroup called %d times in 5 loops over 4 minutes, want 1", got)
	}
	s.AddNodegroup(awsfake.EKSNodegroup{Cluster: "prod", Name: "ng", Labels: map[string]string{"team": "web"}})
	clk.Step(managedTTL + managedJitter)
	if n := template(t, ctx, p, "eks-ng-0001"); n.Labels["team"] != "web" {
		t.Errorf("after the time to live: team=%q, want the node group's new label web", n.Labels["team"])
	}
	if got := s.Calls()["DescribeNodegroup"]; got != 2 {
		t.Errorf("DescribeNodegroup called %d times, want 2", got)
	}
}

// TestManagedNodegroupRefusedFallsBack: with eks:DescribeNodegroup denied
// the group still gets its template (from its tags, with the node group
// label its eks:nodegroup-name tag gives); the refusal is logged once at
// the default level, the call is not repeated every loop, and once the
// permission is granted the node group's labels and taints come after the
// retry interval. A node group EKS does not know, and a group without the
// eks:cluster-name tag, fall back the same way.
func TestManagedNodegroupRefusedFallsBack(t *testing.T) {
	s := startFake(t)
	s.Deny("DescribeNodegroup")
	s.AddGroup(eksGroup("eks-ng-0001", "prod", "ng", map[string]string{LabelTagPrefix + "pool": "ng"}))
	s.AddNodegroup(awsfake.EKSNodegroup{Cluster: "prod", Name: "ng", CapacityType: "SPOT", Labels: map[string]string{"team": "ml"},
		Taints: []awsfake.EKSTaint{{Key: "dedicated", Value: "ml", Effect: "NO_SCHEDULE"}}})
	clk := clocktesting.NewFakeClock(time.Now())
	p := newEKSTestProvider(t, []string{"0:10:eks-ng-0001"}, WithClock(clk))
	var logs logLines
	ctx := logs.ctx()
	for loop := range 4 {
		n := template(t, ctx, p, "eks-ng-0001")
		if n.Labels[EKSNodegroupLabel] != "ng" || n.Labels["pool"] != "ng" || n.Labels["team"] != "" ||
			n.Labels[EKSCapacityTypeLabel] != "" || len(n.Spec.Taints) != 0 {
			t.Fatalf("loop %d: refused: labels %v taints %v, want the tags' only (and nodegroup=ng)", loop, n.Labels, n.Spec.Taints)
		}
		clk.Step(2 * time.Minute)
	}
	if got := s.Calls()["DescribeNodegroup"]; got != 1 {
		t.Errorf("refused DescribeNodegroup called %d times in 4 loops over 6 minutes, want 1", got)
	}
	if got := logs.countAtLevel0("DescribeNodegroup refused by the IAM policy"); got != 1 {
		t.Errorf("the refusal logged %d times at the default level, want 1", got)
	}
	clk.Step(managedRefusedRetry) // refused again: logged, but not at the default level
	template(t, ctx, p, "eks-ng-0001")
	if got, all := logs.countAtLevel0("DescribeNodegroup refused"), logs.count("DescribeNodegroup refused"); got != 1 || all != 2 {
		t.Errorf("after a second refusal: %d lines at the default level, %d in all; want 1 and 2", got, all)
	}

	s.Deny()
	clk.Step(managedRefusedRetry)
	n := template(t, ctx, p, "eks-ng-0001")
	if n.Labels["team"] != "ml" || n.Labels[EKSCapacityTypeLabel] != "SPOT" || len(n.Spec.Taints) != 1 {
		t.Errorf("once allowed: labels %v taints %v, want the node group's", n.Labels, n.Spec.Taints)
	}

	// Unknown node group; no cluster tag (no call at all).
	s.AddGroup(eksGroup("eks-gone-0001", "prod", "gone", nil))
	g := groupOf("eks-nocluster-0001", 0)
	g.Tags = map[string]string{EKSNodegroupTag: "nocluster"}
	s.AddGroup(g)
	p = newEKSTestProvider(t, []string{"0:10:eks-gone-0001", "0:10:eks-nocluster-0001"}, WithClock(clk))
	before := s.Calls()["DescribeNodegroup"]
	for _, name := range []string{"eks-gone-0001", "eks-nocluster-0001"} {
		n := template(t, ctx, p, name)
		if want := strings.TrimSuffix(strings.TrimPrefix(name, "eks-"), "-0001"); n.Labels[EKSNodegroupLabel] != want || len(n.Spec.Taints) != 0 {
			t.Errorf("%s: labels %v taints %v, want only %s=%s", name, n.Labels, n.Spec.Taints, EKSNodegroupLabel, want)
		}
	}
	if got := s.Calls()["DescribeNodegroup"] - before; got != 1 {
		t.Errorf("%d DescribeNodegroup calls for an unknown node group and a group without eks:cluster-name, want 1", got)
	}
	if logs.count("name no managed node group EKS knows") != 1 {
		t.Error("the unknown node group was not logged once")
	}
}

// TestTaintFromEKS maps each EKS effect and refuses the rest.
func TestTaintFromEKS(t *testing.T) {
	for effect, want := range map[ekstypes.TaintEffect]apiv1.TaintEffect{"NO_SCHEDULE": apiv1.TaintEffectNoSchedule,
		"NO_EXECUTE": apiv1.TaintEffectNoExecute, "PREFER_NO_SCHEDULE": apiv1.TaintEffectPreferNoSchedule} {
		got, err := taintFromEKS(ekstypes.Taint{Key: aws.String("k"), Value: aws.String("v"), Effect: effect})
		if err != nil || got != (apiv1.Taint{Key: "k", Value: "v", Effect: want}) {
			t.Errorf("%s: %v, %v", effect, got, err)
		}
	}
	for _, bad := range []ekstypes.Taint{{Key: aws.String("k"), Effect: "NoSchedule"}, {Key: aws.String("k")},
		{Effect: "NO_SCHEDULE"}, {Key: aws.String("-k"), Effect: "NO_SCHEDULE"}} {
		if got, err := taintFromEKS(bad); err == nil {
			t.Errorf("%+v accepted as %v", bad, got)
		}
	}
	var spec managedSpec
	if spec = managedFromEKS(logr.Discard(), &ekstypes.Nodegroup{}); len(spec.Labels) != 0 || len(spec.Taints) != 0 {
		t.Errorf("empty node group: %+v", spec)
	}
}

// countAtLevel0 counts the lines with substr logged at the default level.
func (l *logLines) countAtLevel0(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.lines {
		if strings.Contains(s, substr) && strings.Contains(s, `"level"=0`) {
			n++
		}
	}
	return n
}
