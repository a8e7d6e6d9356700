package aws

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	clocktesting "k8s.io/utils/clock/testing"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/test/awsfake"
)

// nodeList is a NodeLister over a list a test sets.
type nodeList struct {
	mu    sync.Mutex
	nodes []*apiv1.Node
}

func (l *nodeList) List(labels.Selector) ([]*apiv1.Node, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*apiv1.Node(nil), l.nodes...), nil
}

// set makes the list one Node per instance id.
func (l *nodeList) set(s *awsfake.Server, ids ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.nodes = nil
	for _, id := range ids {
		in, _ := s.Instance(id)
		l.nodes = append(l.nodes, nodeOf(providerID(in.Zone, id)))
	}
}

func nodeOf(pid string) *apiv1.Node {
	n := &apiv1.Node{}
	n.Name, n.Spec.ProviderID = lastSegment(pid), pid
	return n
}

func instanceIDs(s *awsfake.Server, group string) []string {
	var out []string
	for _, in := range s.Instances(group) {
		out = append(out, in.ID)
	}
	return out
}

// step advances the clock by d and refreshes; it returns the
// DescribeAutoScalingGroups calls the Refresh made.
func step(t *testing.T, s *awsfake.Server, p *Provider, clk *clocktesting.FakeClock, d time.Duration) int {
	t.Helper()
	clk.Step(d)
	before := s.Calls()["DescribeAutoScalingGroups"] - s.Retries()["DescribeAutoScalingGroups"]
	if err := p.Refresh(context.Background()); err != nil {
		t.Fatalf("refresh: %v", err)
	}
	return s.Calls()["DescribeAutoScalingGroups"] - s.Retries()["DescribeAutoScalingGroups"] - before
}

func targetOf(t *testing.T, p *Provider, name string) int {
	t.Helper()
	n, _ := group(t, p, name).TargetSize(context.Background())
	return n
}

// TestOwnChangesAreReadAtOnce: whatever this process changes shows at the
// next Refresh (applied to the kept description, or read), and a second
// increase in one loop adds to the first.
func TestOwnChangesAreReadAtOnce(t *testing.T) {
	s := startFake(t)
	s.AddGroup(groupOf("ng", 1))
	s.AddGroup(groupOf("other", 1))
	clk := clocktesting.NewFakeClock(time.Now())
	p := newTestProvider(t, []string{"0:10:ng", "0:10:other"}, nil, WithClock(clk))
	ctx := context.Background()
	refreshUntil(t, p, "both instances", func() bool { return len(p.current().byInstance) == 2 })
	if n := step(t, s, p, clk, 10*time.Second); n != 0 {
		t.Fatalf("a Refresh of steady groups made %d describe calls, want 0", n)
	}
	g := group(t, p, "ng")
	if err := g.IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// The same loop's object again: the first increase made the group's
	// description stale, so the second one reads it afresh.
	if err := g.IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if got := s.GroupState("ng").Desired; got != 3 {
		t.Fatalf("two increases by 1 from 1 left desired %d, want 3", got)
	}
	if n := step(t, s, p, clk, 10*time.Second); n != 1 {
		t.Errorf("the Refresh after an increase made %d describe calls, want 1 (the group, on its way up)", n)
	}
	if got := targetOf(t, p, "ng"); got != 3 {
		t.Errorf("target size %d after the increase, want 3 (read at once, not after a minute)", got)
	}
	refreshUntil(t, p, "three instances", func() bool { return len(s.Instances("ng")) == 3 && len(group(t, p, "ng").desc.Instances) == 3 })
	id := s.Instances("ng")[0].ID
	if err := group(t, p, "ng").DeleteNodes(ctx, []*apiv1.Node{nodeOf(providerID("us-east-1a", id))}); err != nil {
		t.Fatal(err)
	}
	step(t, s, p, clk, 10*time.Second)
	if got := targetOf(t, p, "ng"); got != 2 {
		t.Errorf("target size %d after a deletion, want 2", got)
	}
	if got := targetOf(t, p, "other"); got != 1 {
		t.Errorf("the untouched group's target %d, want 1", got)
	}
}

// TestOthersChangesWithinAMinute: a change by someone else to a steady group
// is seen at the minute's full read at the latest; a deleted group
// disappears then, or at once after a call of this process finds it gone.
func TestOthersChangesWithinAMinute(t *testing.T) {
	s := startFake(t)
	for _, n := range []string{"a", "b", "c"} {
		s.AddGroup(groupOf(n, 1))
	}
	clk := clocktesting.NewFakeClock(time.Now())
	p := newTestProvider(t, []string{"0:100:a", "0:100:b", "0:100:c"}, nil, WithClock(clk))
	refreshUntil(t, p, "the instances", func() bool { return len(p.current().byInstance) == 3 })
	changed := groupOf("a", 1)
	changed.Max = 50
	s.AddGroup(changed)
	s.DeleteGroup("b")
	step(t, s, p, clk, 10*time.Second)
	if got := group(t, p, "a").MaxSize(); got != 100 {
		t.Fatalf("max %d within the minute; the test expects the kept description (100)", got)
	}
	// A call that finds the group gone makes the next Refresh drop it.
	stale := group(t, p, "b")
	if err := stale.IncreaseSize(context.Background(), 1); err == nil {
		t.Fatal("increasing a deleted group succeeded")
	}
	if n := step(t, s, p, clk, 10*time.Second); n != 1 {
		t.Errorf("%d describe calls after a call found a group gone, want 1", n)
	}
	if slices.Contains(p.current().order, "b") {
		t.Errorf("the deleted group is still listed: %v", p.current().order)
	}
	s.DeleteGroup("c")
	step(t, s, p, clk, DefaultListInterval)
	if got := group(t, p, "a").MaxSize(); got != 50 {
		t.Errorf("max %d after the minute's read, want 50", got)
	}
	if !slices.Equal(p.current().order, []string{"a"}) {
		t.Errorf("groups %v after the minute's read, want [a]", p.current().order)
	}
	for _, ng := range []string{"b", "c"} {
		for id, g := range p.current().byInstance {
			if g.Id() == ng {
				t.Errorf("instance %s of deleted group %s still listed", id, ng)
			}
		}
	}
}

// TestKeptListingNeverDecidesADeletion: the instance list a deletion checks
// is read afresh, never the one kept between loops: an instance the group
// scaled in meanwhile is not terminated again, and the other deletions of
// the call are refused with it.
func TestKeptListingNeverDecidesADeletion(t *testing.T) {
	s := startFake(t)
	s.AddGroup(groupOf("ng", 2))
	clk := clocktesting.NewFakeClock(time.Now())
	p := newTestProvider(t, []string{"0:10:ng"}, nil, WithClock(clk))
	refreshUntil(t, p, "two instances", func() bool { return len(p.current().byInstance) == 2 })
	kept := instanceIDs(s, "ng")
	s.AddGroup(groupOf("ng", 1)) // someone else scales the group in by one
	step(t, s, p, clk, 10*time.Second)
	if n := len(group(t, p, "ng").desc.Instances); n != 2 {
		t.Fatalf("%d instances in the kept listing; the test expects the stale 2", n)
	}
	var nodes []*apiv1.Node
	for _, id := range kept {
		nodes = append(nodes, nodeOf(providerID("us-east-1a", id)))
	}
	err := group(t, p, "ng").DeleteNodes(context.Background(), nodes)
	if err == nil {
		t.Error("deleting an instance the group no longer has succeeded")
	}
	if got := s.Terminated(); len(got) != 0 {
		t.Errorf("terminated %v on a stale listing (err %v)", got, err)
	}
}

// TestNodesHintAtChanges: with the Nodes in sight, a group moving towards
// its desired capacity is read every transitionalEvery, and at once when a
// Node of an instance no group lists appears, or a listed instance's Node
// goes.
func TestNodesHintAtChanges(t *testing.T) {
	s := startFake(t)
	s.AddGroup(groupOf("ng", 2))
	s.AddGroup(groupOf("steady", 1))
	clk := clocktesting.NewFakeClock(time.Now())
	nodes := &nodeList{}
	p := newTestProvider(t, []string{"0:10:ng", "0:10:steady"}, nil, WithClock(clk), WithNodeLister(nodes))
	refreshUntil(t, p, "the instances", func() bool { return len(p.current().byInstance) == 3 })
	nodes.set(s, append(instanceIDs(s, "ng"), instanceIDs(s, "steady")...)...)
	if n := step(t, s, p, clk, 10*time.Second); n != 0 {
		t.Fatalf("%d describe calls with Nodes agreeing, want 0", n)
	}

	// A scale-up whose launch fails first: the increase reads the group
	// afresh (its base: the loop's Refresh did not read it) and is applied
	// to the kept description (a placeholder at once). AWS not launching
	// it, the group and its activity are read every raisedEvery for
	// raisedWindow after the increase (a failed launch brings no Node to
	// hint at it), so the failure shows at the next Refresh; after that
	// window, it is read transitionalEvery apart again unless a Node of an
	// instance no group lists appears.
	s.SetStartDelay(time.Hour)
	s.FailLaunches("ng", "InsufficientInstanceCapacity", "no room")
	if err := group(t, p, "ng").IncreaseSize(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	activities := s.Calls()["DescribeScalingActivities"]
	if n := step(t, s, p, clk, 2*raisedEvery); n != 1 {
		t.Errorf("%d describe calls %v after an increase AWS did not launch, want 1", n, 2*raisedEvery)
	}
	// (The fake stamps the failed activity with its own clock, behind
	// this test's: the placeholder's failure is not trusted here, only
	// that the activity was read.)
	if got := s.Calls()["DescribeScalingActivities"] - activities; got != 1 {
		t.Errorf("%d activity reads at the first Refresh after the increase, want 1", got)
	}
	if _, creating, failed := states(group(t, p, "ng").instances); creating+failed != 1 {
		t.Fatalf("%d placeholders after the increase was read, want 1", creating+failed)
	}
	if n := step(t, s, p, clk, raisedEvery/2); n != 0 {
		t.Errorf("%d describe calls within raisedEvery of the last read, want 0", n)
	}
	if n := step(t, s, p, clk, raisedWindow); n != 1 {
		t.Errorf("%d describe calls after raisedWindow (and a list interval), want 1", n)
	}
	if n := step(t, s, p, clk, 10*time.Second); n != 0 {
		t.Errorf("%d describe calls 10 s later, past raisedWindow, with nothing new, want 0", n)
	}
	s.FailLaunches("ng", "", "")
	s.AddLaunchTemplate(awsfake.LaunchTemplate{Name: "unrelated", DefaultVersion: 1,
		Versions: []awsfake.LaunchTemplateVersion{{Number: 1, InstanceType: "m5.large"}}}) // retries the launch now
	ids := instanceIDs(s, "ng")
	if len(ids) != 3 {
		t.Fatalf("%d instances of ng on the fake, want 3", len(ids))
	}
	nodes.set(s, append(ids, instanceIDs(s, "steady")...)...) // the new instance's Node registers
	if n := step(t, s, p, clk, 5*time.Second); n != 1 {
		t.Errorf("%d describe calls when an unknown instance's Node appeared, want 1", n)
	}
	if _, ok := p.current().byInstance[ids[2]]; !ok {
		t.Errorf("the new instance %s is not listed after its Node appeared", ids[2])
	}
	if n := step(t, s, p, clk, transitionalEvery); n != 1 {
		t.Errorf("%d describe calls after transitionalEvery with an instance still Pending, want 1", n)
	}

	// The Node of the steady group's instance goes: that group is read.
	s.SetStartDelay(0)
	steady := instanceIDs(s, "steady")
	s.AddGroup(groupOf("steady", 0))
	nodes.set(s, ids...)
	if n := step(t, s, p, clk, 10*time.Second); n != 1 {
		t.Errorf("%d describe calls when a listed instance's Node went, want 1", n)
	}
	for _, in := range group(t, p, "steady").instances {
		if lastSegment(in.Id) == steady[0] && in.Status.State != cloudprovider.InstanceDeleting {
			t.Errorf("instance %s listed %v after its Node went and the group was read", steady[0], in.Status.State)
		}
	}
	if got := targetOf(t, p, "steady"); got != 0 {
		t.Errorf("steady's target %d after the read, want 0", got)
	}
}
