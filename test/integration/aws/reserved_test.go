package aws

import (
	"context"
	"testing"
	"time"

	"k8s.io/autoscaler/cluster-autoscaler/test/awsfake"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// TestAWSReservedCapacityIsUsedFirst: with --expander=price, of two groups
// of m5.large at the same On-Demand price, one whose launch template
// targets a Capacity Reservation of 2 instances, a pending Deployment
// needing 3 nodes scales the reserved group first, to the reservation's
// size exactly, then the ordinary group for the rest; no launch is tried
// beyond the reservation.
func TestAWSReservedCapacityIsUsedFirst(t *testing.T) {
	e := framework.New(t)
	s := startAWS(e)
	s.AddOnDemandPrice(awsfake.OnDemandPrice{Region: "us-east-1", InstanceType: "m5.large", USDPerHour: 0.096})
	cr := s.AddCapacityReservation(awsfake.CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a",
		TotalInstanceCount: 2, InstanceMatchCriteria: "targeted"})
	lt := s.AddLaunchTemplate(awsfake.LaunchTemplate{Name: "reserved", Versions: []awsfake.LaunchTemplateVersion{{Number: 1,
		InstanceType: "m5.large", CapacityReservation: &awsfake.CapacityReservationSpec{TargetID: cr}}}})
	reserved := awsGroup("reserved", 0, 5, 0, nil)
	reserved.LaunchTemplate = &awsfake.LaunchTemplateSpec{ID: lt, Version: "$Default"}
	s.AddGroup(reserved)
	s.AddGroup(awsGroup("ordinary", 0, 5, 0, nil))
	itest.DumpPods(e)
	itest.Deployment(e, "batch", 6, map[string]string{"shape": "standard"}) // 1 CPU each: three m5.large

	itest.StartAutoscalerEnv(t, s.Env(), "autoscaler", awsArgs(e, "--nodes=0:5:ordinary", "--nodes=0:5:reserved", "--expander=price")...)
	e.Eventually(120*time.Second, "all 6 batch pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 6)
	})
	res, ord := s.DesiredChanges("reserved"), s.DesiredChanges("ordinary")
	if len(res) == 0 || res[0].From != 0 {
		t.Fatalf("reserved group's desired capacity changes %+v, want it scaled from 0", res)
	}
	if len(ord) > 0 && ord[0].At.Before(res[0].At) {
		t.Errorf("the ordinary group was scaled (%+v) before the reserved one (%+v)", ord[0], res[0])
	}
	if got := s.GroupState("reserved").Desired; got != 2 {
		t.Errorf("reserved group's desired capacity %d, want 2 (the reservation's size)", got)
	}
	if got := s.GroupState("ordinary").Desired; got < 1 {
		t.Errorf("ordinary group's desired capacity %d, want the rest there", got)
	}
	if used, left := s.ReservationUsage(cr); used != 2 || left != 0 {
		t.Errorf("reservation used %d, left %d; want 2, 0", used, left)
	}
	if failed := s.FailedLaunches("reserved"); len(failed) != 0 {
		t.Errorf("%d failed launches in the reserved group (beyond its reservation), want 0", len(failed))
	}
	for _, c := range res {
		if c.To > 2 {
			t.Errorf("reserved group asked for %d instances, beyond the reservation of 2", c.To)
		}
	}
	t.Logf("reserved group's changes %+v, ordinary group's %+v; DescribeCapacityReservations calls %d",
		res, ord, s.Calls()["DescribeCapacityReservations"])
}
