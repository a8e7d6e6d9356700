package awsfake

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
)

// TestCapacityBlockEndTerminatesItsInstances: at a block's end its running
// instances are terminated (the desired capacity stays), and the fake says
// which; an instance gone before the end is not among them.
func TestCapacityBlockEndTerminatesItsInstances(t *testing.T) {
	s := startFake(t)
	s.AddInstanceType(InstanceType{Name: "m5.large", VCPU: 2, MemoryMiB: 8192, MaxENIs: 3, IPv4PerENI: 10})
	s.AddSubnet("subnet-a", "us-east-1a")
	end := time.Now().Add(3 * time.Second)
	block := s.AddCapacityReservation(CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a", TotalInstanceCount: 2,
		ReservationType: "capacity-block", StartDate: time.Now().Add(-time.Hour), EndDate: end, InstanceMatchCriteria: "targeted"})
	lt := s.AddLaunchTemplate(LaunchTemplate{Name: "block", Versions: []LaunchTemplateVersion{{Number: 1, InstanceType: "m5.large",
		MarketType: "capacity-block", CapacityReservation: &CapacityReservationSpec{TargetID: block}}}})
	c := sdkClients(t, s)
	s.AddGroup(Group{Name: "block", Max: 5, Desired: 2, LaunchTemplate: &LaunchTemplateSpec{ID: lt}, Subnets: []string{"subnet-a"}})
	var ids []string
	eventually(t, "the block group's two instances", func() (bool, error) {
		ids = ids[:0]
		for _, in := range s.Instances("block") {
			if in.Lifecycle == LifecycleInService {
				ids = append(ids, in.ID)
			}
		}
		return len(ids) == 2, nil
	})
	// One goes before the end, as a drain would take it.
	if _, err := c.asg.TerminateInstanceInAutoScalingGroup(t.Context(), &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		InstanceId: aws.String(ids[0]), ShouldDecrementDesiredCapacity: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	if got := s.ReclaimedAtBlockEnd(block); len(got) != 0 {
		t.Fatalf("reclaimed %v before the end", got)
	}
	time.Sleep(time.Until(end))
	eventually(t, "the block's end reclaiming the instance left", func() (bool, error) {
		got := s.ReclaimedAtBlockEnd(block)
		return len(got) == 1 && got[0] == ids[1], nil
	})
	out, err := c.asg.DescribeScalingActivities(t.Context(), &autoscaling.DescribeScalingActivitiesInput{AutoScalingGroupName: aws.String("block")})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, a := range out.Activities {
		found = found || strings.Contains(aws.ToString(a.Cause), "Capacity Block "+block+" ended")
	}
	if !found {
		t.Error("no activity says the block's end took the instance")
	}
	g, err := c.asg.DescribeAutoScalingGroups(t.Context(), &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{"block"}})
	if err != nil || aws.ToInt32(g.AutoScalingGroups[0].DesiredCapacity) != 1 {
		t.Errorf("desired capacity after the end: %v, %v; want 1 (kept)", g, err)
	}
}
