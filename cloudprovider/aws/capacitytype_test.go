package aws

import (
	"context"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"k8s.io/autoscaler/cluster-autoscaler/test/awsfake"
)

// addSpotTemplate adds a launch template whose version asks for Spot.
func addSpotTemplate(s *awsfake.Server) {
	s.AddLaunchTemplate(awsfake.LaunchTemplate{ID: "lt-spot", Name: "spot", DefaultVersion: 1,
		Versions: []awsfake.LaunchTemplateVersion{{Number: 1, InstanceType: "m5.large", MarketType: "spot"}}})
}

// mixedGroup is a group with a mixed-instances policy of m5.large with
// the given distribution (pct nil: AWS's default, 100).
func mixedGroup(name string, desired, base int, pct *int) awsfake.Group {
	return awsfake.Group{Name: name, Max: 10, Desired: desired, Subnets: []string{"subnet-a"}, MixedInstances: &awsfake.MixedInstancesPolicy{
		LaunchTemplate: awsfake.LaunchTemplateSpec{ID: "lt-0001"}, Overrides: []string{"m5.large"},
		OnDemandBaseCapacity: base, OnDemandPercentageAboveBaseCapacity: pct}}
}

func percent(n int) *int { return &n }

// podSelecting is a pod whose node affinity requires key In values
// (nodeSelector when affinity is false).
func podSelecting(key, value string, affinity bool) *apiv1.Pod {
	pod := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}}
	if !affinity {
		pod.Spec.NodeSelector = map[string]string{key: value}
		return pod
	}
	pod.Spec.Affinity = &apiv1.Affinity{NodeAffinity: &apiv1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &apiv1.NodeSelector{
		NodeSelectorTerms: []apiv1.NodeSelectorTerm{{MatchExpressions: []apiv1.NodeSelectorRequirement{
			{Key: key, Operator: apiv1.NodeSelectorOpIn, Values: []string{value}}}}}}}}
	return pod
}

// fits is the scheduler's NodeAffinity check (nodeSelector and required
// node affinity) of a pod on a node.
func fits(t *testing.T, pod *apiv1.Pod, node *apiv1.Node) bool {
	t.Helper()
	ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestTemplateCapacityType: templates carry karpenter.sh/capacity-type and
// eks.amazonaws.com/capacityType from the group's mixed-instances policy
// or its launch template's market type, none when a scale-up may add
// both; a pod selecting On-Demand (either label, nodeSelector or
// affinity) fits no Spot or mixed group's template, through the SDK
// against the fake.
func TestTemplateCapacityType(t *testing.T) {
	s := startFake(t)
	addSpotTemplate(s)
	s.AddGroup(awsfake.Group{Name: "od-lt", Max: 10, LaunchTemplate: lt("$Default"), Subnets: []string{"subnet-a"}})
	s.AddGroup(awsfake.Group{Name: "spot-lt", Max: 10, LaunchTemplate: &awsfake.LaunchTemplateSpec{ID: "lt-spot"}, Subnets: []string{"subnet-a"}})
	s.AddGroup(mixedGroup("od-mixed", 0, 0, nil))
	s.AddGroup(mixedGroup("spot-mixed", 0, 0, percent(0)))
	s.AddGroup(mixedGroup("half", 0, 0, percent(50)))
	s.AddGroup(mixedGroup("base-unfilled", 1, 2, percent(0)))
	s.AddGroup(mixedGroup("base-filled", 2, 2, percent(0)))
	tagged := awsfake.Group{Name: "tagged", Max: 10, LaunchTemplate: lt("$Default"), Subnets: []string{"subnet-a"},
		Tags: map[string]string{LabelTagPrefix + CapacityTypeLabel: "spot"}}
	s.AddGroup(tagged)
	names := []string{"od-lt", "spot-lt", "od-mixed", "spot-mixed", "half", "base-unfilled", "base-filled", "tagged"}
	var nodes []string
	for _, n := range names {
		nodes = append(nodes, "0:10:"+n)
	}
	p := newTestProvider(t, nodes, nil)
	ctx := context.Background()
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{ // neutral, EKS
		"od-lt": {"on-demand", "ON_DEMAND"}, "spot-lt": {"spot", "SPOT"}, "od-mixed": {"on-demand", "ON_DEMAND"},
		"spot-mixed": {"spot", "SPOT"}, "half": {"", ""}, "base-unfilled": {"", ""}, "base-filled": {"spot", "SPOT"},
		"tagged": {"spot", "ON_DEMAND"}, // the tag wins for its key only
	}
	onDemandPods := []*apiv1.Pod{podSelecting(CapacityTypeLabel, "on-demand", false), podSelecting(CapacityTypeLabel, "on-demand", true),
		podSelecting(EKSCapacityTypeLabel, "ON_DEMAND", false), podSelecting(EKSCapacityTypeLabel, "ON_DEMAND", true)}
	for _, n := range names {
		info, err := group(t, p, n).TemplateNodeInfo(ctx)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		l := info.Node.Labels
		if got := [2]string{l[CapacityTypeLabel], l[EKSCapacityTypeLabel]}; got != want[n] {
			t.Errorf("%s: capacity labels %q, want %q", n, got, want[n])
		}
		for i, pod := range onDemandPods {
			wantFit := want[n][0] == "on-demand"
			if n == "tagged" {
				wantFit = i >= 2 // the EKS label still says ON_DEMAND
			}
			if got := fits(t, pod, info.Node); got != wantFit {
				t.Errorf("%s: On-Demand pod %d fits %t, want %t", n, i, got, wantFit)
			}
		}
		spotPod := podSelecting(CapacityTypeLabel, "spot", false)
		if got := fits(t, spotPod, info.Node); got != (want[n][0] == "spot") {
			t.Errorf("%s: Spot pod fits %t", n, got)
		}
	}
}

// TestNodeCapacityFromTheInstanceLifecycle: a running node without a
// capacity label in a group of both kinds is told by its instance's
// lifecycle (DescribeInstances, one call for the group's instances, kept);
// a node with a label or of a group of one kind needs no call.
func TestNodeCapacityFromTheInstanceLifecycle(t *testing.T) {
	s := startFake(t)
	s.AddGroup(mixedGroup("mixed", 3, 1, percent(0))) // 1 On-Demand, 2 Spot
	s.AddGroup(mixedGroup("all-od", 2, 0, nil))
	p := newTestProvider(t, []string{"0:10:mixed", "0:10:all-od"}, nil)
	ctx := context.Background()
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	before := s.Calls()["DescribeInstances"]
	spot := 0
	for _, in := range s.Instances("mixed") {
		node := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: in.ID}, Spec: apiv1.NodeSpec{ProviderID: providerID(in.Zone, in.ID)}}
		want := capacityOnDemand
		if in.Spot {
			want = capacitySpot
			spot++
		}
		if got := p.nodeCapacity(ctx, node); got != want {
			t.Errorf("instance %s: %q, want %q", in.ID, got, want)
		}
	}
	if spot != 2 {
		t.Fatalf("the fake launched %d Spot instances, want 2", spot)
	}
	if got := s.Calls()["DescribeInstances"] - before; got != 1 {
		t.Errorf("%d DescribeInstances calls for 3 nodes, want 1", got)
	}
	for _, in := range s.Instances("all-od") {
		node := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: in.ID}, Spec: apiv1.NodeSpec{ProviderID: providerID(in.Zone, in.ID)}}
		if got := p.nodeCapacity(ctx, node); got != capacityOnDemand {
			t.Errorf("On-Demand group's instance %s: %q", in.ID, got)
		}
	}
	labelled := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{EKSCapacityTypeLabel: "SPOT"}}}
	if got := p.nodeCapacity(ctx, labelled); got != capacitySpot {
		t.Errorf("labelled node: %q, want spot", got)
	}
	if got := s.Calls()["DescribeInstances"] - before; got != 1 {
		t.Errorf("%d DescribeInstances calls in all, want 1", got)
	}
}

// TestManagedNodegroupCapacityType: an EKS managed node group's capacity
// type is EKS's (DescribeNodegroup), under both keys, whatever its Auto
// Scaling group's launch template says.
func TestManagedNodegroupCapacityType(t *testing.T) {
	s := startFake(t)
	s.AddGroup(eksGroup("eks-spot-0001", "prod", "spot", nil)) // an On-Demand launch template
	s.AddNodegroup(awsfake.EKSNodegroup{Cluster: "prod", Name: "spot", CapacityType: "SPOT"})
	p := newEKSTestProvider(t, []string{"0:10:eks-spot-0001"})
	n := template(t, context.Background(), p, "eks-spot-0001")
	if n.Labels[CapacityTypeLabel] != "spot" || n.Labels[EKSCapacityTypeLabel] != "SPOT" {
		t.Errorf("labels %v, want both capacity keys saying Spot", n.Labels)
	}
}
