package aws

import (
	"context"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/test/awsfake"
)

// oldAndPlaceholders sets up group ng (one zone, termination policy
// OldestInstance) with `old` InService instances and `placeholders` more
// desired whose launches fail, and returns the old instance IDs.
func oldAndPlaceholders(t *testing.T, s *awsfake.Server, p *Provider, old, placeholders int) []string {
	t.Helper()
	s.AddGroup(awsfake.Group{Name: "ng", Max: 100, Desired: old, LaunchTemplate: lt("$Default"), Subnets: []string{"subnet-a"},
		TerminationPolicies: []string{"OldestInstance"}})
	refreshUntil(t, p, "old instances running", func() bool {
		running, _, _ := states(group(t, p, "ng").instances)
		return running == old
	})
	var ids []string
	for _, in := range s.Instances("ng") {
		ids = append(ids, in.ID)
	}
	sort.Strings(ids)
	s.FailLaunches("ng", "InsufficientInstanceCapacity", "We currently do not have sufficient m5.large capacity.")
	if err := group(t, p, "ng").IncreaseSize(context.Background(), placeholders); err != nil {
		t.Fatal(err)
	}
	refreshUntil(t, p, "failed placeholders", func() bool {
		_, _, failed := states(group(t, p, "ng").instances)
		return failed == placeholders
	})
	return ids
}

// activeIDs returns the IDs of the group's Pending and InService instances,
// sorted, and whether any of them is protected from scale-in.
func activeIDs(s *awsfake.Server, name string) (ids []string, protected []string) {
	for _, in := range s.Instances(name) {
		if in.Lifecycle == awsfake.LifecyclePending || in.Lifecycle == awsfake.LifecycleInService {
			ids = append(ids, in.ID)
			if in.ProtectedFromScaleIn {
				protected = append(protected, in.ID)
			}
		}
	}
	sort.Strings(ids)
	return ids, protected
}

// TestCancellingCapacityRacingALaunchKeepsOldInstances: the group launches
// the cancelled capacity between the provider's description and its
// SetDesiredCapacity. AWS then terminates instances of its own choosing;
// with OldestInstance that would be the old ones (running pods) unless they
// are protected from scale-in.
func TestCancellingCapacityRacingALaunchKeepsOldInstances(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cancel func(ctx context.Context, ng *NodeGroup) error
	}{
		{"DecreaseTargetSize", func(ctx context.Context, ng *NodeGroup) error { return ng.DecreaseTargetSize(ctx, -2) }},
		{"DeleteNodes of placeholders", func(ctx context.Context, ng *NodeGroup) error {
			var victims []*apiv1.Node
			for _, in := range ng.instances {
				if isPlaceholder(lastSegment(in.Id)) {
					victims = append(victims, cloudprovider.InstanceNode(in.Id))
				}
			}
			return ng.DeleteNodes(ctx, victims)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startFake(t)
			p := newTestProvider(t, []string{"0:100:ng"}, nil)
			old := oldAndPlaceholders(t, s, p, 2, 2)
			var once sync.Once
			s.BeforeCall("SetDesiredCapacity", func() {
				once.Do(func() { s.FailLaunches("ng", "", "") }) // the launches succeed now
			})
			if err := tc.cancel(context.Background(), group(t, p, "ng")); err != nil {
				t.Fatalf("cancelling the placeholders: %v", err)
			}
			active, protected := activeIDs(s, "ng")
			for _, id := range old {
				if !slices.Contains(active, id) {
					in, _ := s.Instance(id)
					t.Errorf("old instance %s is %s: AWS picked it when the desired capacity went down (active now %v)", id, in.Lifecycle, active)
				}
			}
			if len(protected) != 0 {
				t.Errorf("instances %v are still protected from scale-in after the cancellation", protected)
			}
			if st := s.GroupState("ng"); st.Desired != len(active) || st.Desired < 2 {
				t.Errorf("desired %d with active %v: want the old instances, and as many as active", st.Desired, active)
			}
		})
	}
}

func TestCancellingCapacityProtectsOnlyWhatItMust(t *testing.T) {
	s := startFake(t)
	p := newTestProvider(t, []string{"0:100:ng"}, nil)
	old := oldAndPlaceholders(t, s, p, 60, 2)
	// An instance the operator protected stays protected.
	mine := old[7]
	protectByOperator(t, s, mine)
	if err := p.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := s.Calls()["SetInstanceProtection"]
	if err := group(t, p, "ng").DecreaseTargetSize(context.Background(), -2); err != nil {
		t.Fatal(err)
	}
	if got := s.GroupState("ng").Desired; got != 60 {
		t.Errorf("desired %d, want 60", got)
	}
	// 59 unprotected instances: two batches to protect, two to lift.
	if got := s.Calls()["SetInstanceProtection"] - before; got != 4 {
		t.Errorf("%d SetInstanceProtection calls, want 4 (batches of 50, on and off)", got)
	}
	if _, protected := activeIDs(s, "ng"); !slices.Equal(protected, []string{mine}) {
		t.Errorf("protected after the cancellation: %v, want only the operator's %s", protected, mine)
	}
}

// protectByOperator protects an instance as an operator would, through the
// SDK.
func protectByOperator(t *testing.T, s *awsfake.Server, id string) {
	t.Helper()
	cfg, err := loadConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	a, _ := newClients(cfg)
	if _, err := a.SetInstanceProtection(t.Context(), &autoscaling.SetInstanceProtectionInput{
		AutoScalingGroupName: aws.String("ng"), InstanceIds: []string{id}, ProtectedFromScaleIn: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
}

func TestCancellingCapacityRefusesWhatItCannotMakeSafe(t *testing.T) {
	t.Run("no permission to protect", func(t *testing.T) {
		s := startFake(t)
		p := newTestProvider(t, []string{"0:100:ng"}, nil)
		oldAndPlaceholders(t, s, p, 2, 2)
		s.Deny("SetInstanceProtection")
		err := group(t, p, "ng").DecreaseTargetSize(context.Background(), -2)
		if err == nil || !strings.Contains(err.Error(), "autoscaling:SetInstanceProtection") || !strings.Contains(err.Error(), "nothing cancelled") {
			t.Fatalf("error %v, want a refusal naming the missing permission", err)
		}
		if got := s.GroupState("ng").Desired; got != 4 {
			t.Errorf("desired %d after the refusal, want 4 (unchanged)", got)
		}
	})
	t.Run("an instance still pending", func(t *testing.T) {
		s := startFake(t)
		p := newTestProvider(t, []string{"0:100:ng"}, nil)
		oldAndPlaceholders(t, s, p, 2, 2)
		s.SetStartDelay(time.Hour)
		s.FailLaunches("ng", "", "") // both placeholders launch, and stay Pending
		s.FailLaunches("ng", "InsufficientInstanceCapacity", "no capacity")
		if err := group(t, p, "ng").IncreaseSize(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		// One placeholder without an instance; cancelling it waits for
		// the Pending ones to be in service.
		err := group(t, p, "ng").DecreaseTargetSize(context.Background(), -1)
		if err == nil || !strings.Contains(err.Error(), "still Pending") {
			t.Fatalf("error %v, want a refusal while an instance is Pending", err)
		}
		if got := s.GroupState("ng").Desired; got != 5 {
			t.Errorf("desired %d after the refusal, want 5 (unchanged)", got)
		}
	})
}

// TestDecreaseReadsTheGroupAfresh: placeholders that failed when the loop's
// Refresh read the group launch before the core cancels them. The decrease
// must judge by the group as it is now (its instances are live: nothing
// is cancelled), never by the loop's kept description, which would cancel
// two launched instances.
func TestDecreaseReadsTheGroupAfresh(t *testing.T) {
	s := startFake(t)
	p := newTestProvider(t, []string{"0:100:ng"}, nil)
	oldAndPlaceholders(t, s, p, 2, 2)
	s.FailLaunches("ng", "", "") // the launches succeed now, unseen by the provider
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		// Any call lets the fake reconcile; this one goes around the provider.
		if _, err := p.asg.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{}); err != nil {
			t.Fatal(err)
		}
		if active, _ := activeIDs(s, "ng"); len(active) == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the placeholders never launched")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := group(t, p, "ng").DecreaseTargetSize(ctx, -2); err == nil {
		t.Error("DecreaseTargetSize cancelled capacity that has launched since the loop's Refresh")
	}
	if active, _ := activeIDs(s, "ng"); len(active) != 4 || s.GroupState("ng").Desired != 4 {
		t.Errorf("active %v, desired %d after the refused decrease: want 4 and 4", active, s.GroupState("ng").Desired)
	}
}
