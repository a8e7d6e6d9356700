package aws

import (
	"context"
	"fmt"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// TestOwnTerminationIsAppliedNotRead: a termination of this process is
// applied to the kept description (the instance Deleting, the target one
// lower) and its group is not read again for it; an instance terminating
// by someone else's doing keeps its group read each loop.
func TestOwnTerminationIsAppliedNotRead(t *testing.T) {
	s := startFake(t)
	s.AddGroup(groupOf("ng", 2))
	s.AddGroup(groupOf("other", 2))
	clk := clocktesting.NewFakeClock(time.Now())
	p := newTestProvider(t, []string{"0:10:ng", "0:10:other"}, nil, WithClock(clk))
	refreshUntil(t, p, "the instances", func() bool { return len(p.current().byInstance) == 4 })
	s.SetStartDelay(time.Hour) // terminations stay Terminating
	id := s.Instances("ng")[0].ID
	node := nodeOf(providerID("us-east-1a", id))
	if err := group(t, p, "ng").DeleteNodes(context.Background(), []*apiv1.Node{node}); err != nil {
		t.Fatal(err)
	}
	if n := step(t, s, p, clk, 10*time.Second); n != 0 {
		t.Errorf("%d describe calls after this process's termination, want 0 (applied)", n)
	}
	if got := targetOf(t, p, "ng"); got != 1 {
		t.Errorf("target %d after the termination, want 1", got)
	}
	deleting := false
	for _, in := range group(t, p, "ng").instances {
		if lastSegment(in.Id) == id {
			deleting = in.Status.State == cloudprovider.InstanceDeleting
		}
	}
	if !deleting {
		t.Errorf("the terminated instance %s is not listed as deleting", id)
	}

	s.AddGroup(groupOf("other", 1)) // someone else scales in: one instance Terminating
	if n := step(t, s, p, clk, DefaultListInterval); n != 1 {
		t.Errorf("%d describe calls at the minute, want 1 (both groups in one call)", n)
	}
	if n := step(t, s, p, clk, 10*time.Second); n != 1 {
		t.Errorf("%d describe calls with someone else's instance terminating, want 1 (that group on its way)", n)
	}
	if got := p.ownTerminations[id]; got != "ng" {
		t.Errorf("the instance this process terminated is remembered as of group %q, want ng", got)
	}
	s.SetStartDelay(0)
	step(t, s, p, clk, DefaultListInterval) // the termination is done: forgotten
	if _, ok := p.ownTerminations[id]; ok {
		t.Errorf("instance %s still remembered after its group stopped listing it", id)
	}
}

// TestReadsNeverHideOwnWrites: a read that started before a write of this
// process, or before a later read, is not kept over it.
func TestReadsNeverHideOwnWrites(t *testing.T) {
	s := startFake(t)
	s.AddGroup(groupOf("a", 2))
	clk := clocktesting.NewFakeClock(time.Now())
	p := newTestProvider(t, []string{"0:10:a"}, nil, WithClock(clk))
	refreshUntil(t, p, "the instances", func() bool { return len(p.current().byInstance) == 2 })
	old := p.cache["a"].desc

	// A read starts (its generations taken), a write runs and is applied,
	// then the read's answer (from before the write) arrives.
	names := []string{"a"}
	gens := p.writeGens(names)
	start, seq := clk.Now(), p.seq.Add(1)
	p.beginWrite("a")
	p.endWrite("a")
	p.applyWrite("a", desiredSet(3))
	if kept := p.keepFresh(start, seq, names, map[string]groupDesc{"a": old}, gens); kept["a"] {
		t.Error("a read made across a write was kept")
	}
	if got := p.cache["a"].desc.Desired; got != 3 {
		t.Errorf("kept desired %d, want 3 (the write's)", got)
	}

	// A read that started before a Refresh's does not replace it.
	gens = p.writeGens(names)
	start, seq = clk.Now(), p.seq.Add(1)
	step(t, s, p, clk, DefaultListInterval)
	stale := old
	stale.Desired = 7
	if kept := p.keepFresh(start, seq, names, map[string]groupDesc{"a": stale}, gens); kept["a"] {
		t.Error("a read older than the Refresh's was kept")
	}
	if got := p.cache["a"].desc.Desired; got == 7 {
		t.Error("the older read replaced the Refresh's")
	}
}

// TestFreshReadsFillTheCallAndSpareTheMinutesRead: the fresh read before a
// deletion names up to 100 groups (the one deleted from, then those read
// longest ago); the groups it covered are not read again until a minute
// after it.
func TestFreshReadsFillTheCallAndSpareTheMinutesRead(t *testing.T) {
	s := startFake(t)
	var nodes []string
	for i := range 150 {
		name := fmt.Sprintf("ng-%03d", i)
		s.AddGroup(groupOf(name, 1))
		nodes = append(nodes, "0:10:"+name)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	p := newTestProvider(t, nodes, nil, WithClock(clk))
	refreshUntil(t, p, "every instance", func() bool { return len(p.current().byInstance) == 150 })
	first := clk.Now()
	// Half of them read again 30 s later (an older read for the rest).
	step(t, s, p, clk, 30*time.Second)
	for i := range 75 {
		p.invalidate(fmt.Sprintf("ng-%03d", i))
	}
	if n := step(t, s, p, clk, 0); n != 1 {
		t.Fatalf("%d describe calls for 75 changed groups, want 1", n)
	}
	// That read was filled with 25 groups of the older read.
	older := 0
	for i := 75; i < 150; i++ {
		if p.cache[fmt.Sprintf("ng-%03d", i)].readAt.Equal(first) {
			older++
		}
	}
	if older != 50 {
		t.Fatalf("%d groups left from the first read, want 50 (25 filled the call)", older)
	}
	// A deletion at 40 s: its fresh read fills its call with the 50 left
	// and 49 of the others.
	step(t, s, p, clk, 10*time.Second)
	g := group(t, p, "ng-149")
	id := lastSegment(g.instances[0].Id)
	before := s.Calls()["DescribeAutoScalingGroups"]
	if err := g.DeleteNodes(context.Background(), []*apiv1.Node{nodeOf(providerID("us-east-1a", id))}); err != nil {
		t.Fatal(err)
	}
	if n := s.Calls()["DescribeAutoScalingGroups"] - before; n != 1 {
		t.Fatalf("%d describe calls before a deletion, want 1", n)
	}
	for i := 75; i < 150; i++ {
		if c := p.cache[fmt.Sprintf("ng-%03d", i)]; c.readAt.Equal(first) {
			t.Fatalf("group ng-%03d not covered by the deletion's read", i)
		}
	}
	// At 60 s from the first read, nothing is a minute old: no call. At 90
	// s, the 75 groups read at 30 s are (one call, filled).
	if n := step(t, s, p, clk, 20*time.Second); n != 0 {
		t.Errorf("%d describe calls at the minute with every group read since, want 0", n)
	}
	if n := step(t, s, p, clk, 30*time.Second); n != 1 {
		t.Errorf("%d describe calls a minute after the second read, want 1", n)
	}
}
