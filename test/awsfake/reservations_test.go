package awsfake

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"
)

// available reads a reservation's AvailableInstanceCount through the SDK.
func available(t *testing.T, c clients, id string) int {
	t.Helper()
	out, err := c.ec2.DescribeCapacityReservations(t.Context(), &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{id}})
	if err != nil || len(out.CapacityReservations) != 1 {
		t.Fatalf("DescribeCapacityReservations(%s): %v", id, err)
	}
	return int(aws.ToInt32(out.CapacityReservations[0].AvailableInstanceCount))
}

// TestCapacityReservationsDescribed: what DescribeCapacityReservations
// reports of an ODCR and of Capacity Blocks before, during and after them,
// and that an unknown ID fails the call.
func TestCapacityReservationsDescribed(t *testing.T) {
	s := startFake(t)
	c := sdkClients(t, s)
	now := time.Now().UTC().Truncate(time.Second)
	odcr := s.AddCapacityReservation(CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a", TotalInstanceCount: 3,
		InstanceMatchCriteria: "targeted"})
	block := s.AddCapacityReservation(CapacityReservation{InstanceType: "p5.48xlarge", AvailabilityZone: "us-east-1b", TotalInstanceCount: 2,
		ReservationType: "capacity-block", StartDate: now.Add(-time.Hour), EndDate: now.Add(23 * time.Hour)})
	later := s.AddCapacityReservation(CapacityReservation{InstanceType: "p5.48xlarge", AvailabilityZone: "us-east-1b", TotalInstanceCount: 1,
		ReservationType: "capacity-block", StartDate: now.Add(time.Hour), EndDate: now.Add(25 * time.Hour)})
	past := s.AddCapacityReservation(CapacityReservation{InstanceType: "p5.48xlarge", AvailabilityZone: "us-east-1b", TotalInstanceCount: 1,
		ReservationType: "capacity-block", StartDate: now.Add(-25 * time.Hour), EndDate: now.Add(-time.Hour)})

	out, err := c.ec2.DescribeCapacityReservations(t.Context(), &ec2.DescribeCapacityReservationsInput{})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Type, Zone, State, Kind, Match string
		Total, Available               int32
		End                            time.Time
	}
	got := map[string]row{}
	for _, r := range out.CapacityReservations {
		got[aws.ToString(r.CapacityReservationId)] = row{aws.ToString(r.InstanceType), aws.ToString(r.AvailabilityZone), string(r.State),
			string(r.ReservationType), string(r.InstanceMatchCriteria), aws.ToInt32(r.TotalInstanceCount), aws.ToInt32(r.AvailableInstanceCount),
			aws.ToTime(r.EndDate)}
	}
	want := map[string]row{
		odcr:  {"m5.large", "us-east-1a", "active", "default", "targeted", 3, 3, time.Time{}},
		block: {"p5.48xlarge", "us-east-1b", "active", "capacity-block", "open", 2, 2, now.Add(23 * time.Hour)},
		later: {"p5.48xlarge", "us-east-1b", "scheduled", "capacity-block", "open", 1, 1, now.Add(25 * time.Hour)},
		past:  {"p5.48xlarge", "us-east-1b", "expired", "capacity-block", "open", 1, 1, now.Add(-time.Hour)},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("reservations (-want +got):\n%s", d)
	}
	_, err = c.ec2.DescribeCapacityReservations(t.Context(), &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{"cr-00000000000000000"}})
	if code := apiErrorCode(err); code != "InvalidCapacityReservationId.NotFound" {
		t.Errorf("unknown reservation: error %v (code %q), want InvalidCapacityReservationId.NotFound", err, code)
	}
}

// TestReservationConsumedByLaunches: a group whose launch template targets
// a reservation launches into it (in its zone) until it is full, then
// records a failed launch with ReservationCapacityExceeded and launches
// nothing beyond; a termination gives the room back. The template's
// CapacityReservationSpecification and market type read back.
func TestReservationConsumedByLaunches(t *testing.T) {
	s := startFake(t)
	s.AddInstanceType(InstanceType{Name: "m5.large", VCPU: 2, MemoryMiB: 8192, MaxENIs: 3, IPv4PerENI: 10})
	s.AddSubnet("subnet-a", "us-east-1a")
	s.AddSubnet("subnet-b", "us-east-1b")
	c := sdkClients(t, s)
	cr := s.AddCapacityReservation(CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1b", TotalInstanceCount: 2,
		InstanceMatchCriteria: "targeted"})
	lt := s.AddLaunchTemplate(LaunchTemplate{Name: "reserved", Versions: []LaunchTemplateVersion{{Number: 1, InstanceType: "m5.large",
		CapacityReservation: &CapacityReservationSpec{Preference: "capacity-reservations-only", TargetID: cr}}}})

	v, err := c.ec2.DescribeLaunchTemplateVersions(t.Context(), &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: aws.String(lt)})
	if err != nil || len(v.LaunchTemplateVersions) != 1 {
		t.Fatalf("DescribeLaunchTemplateVersions: %v", err)
	}
	spec := v.LaunchTemplateVersions[0].LaunchTemplateData.CapacityReservationSpecification
	if spec == nil || spec.CapacityReservationPreference != ec2types.CapacityReservationPreferenceCapacityReservationsOnly ||
		spec.CapacityReservationTarget == nil || aws.ToString(spec.CapacityReservationTarget.CapacityReservationId) != cr {
		t.Errorf("template's CapacityReservationSpecification %+v, want capacity-reservations-only targeting %s", spec, cr)
	}

	s.AddGroup(Group{Name: "g", Max: 10, Desired: 1, LaunchTemplate: &LaunchTemplateSpec{ID: lt}, Subnets: []string{"subnet-a", "subnet-b"}})
	eventually(t, "one instance", func() (bool, error) { return available(t, c, cr) == 1, nil })
	if _, err := c.asg.SetDesiredCapacity(t.Context(), &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String("g"),
		DesiredCapacity: aws.Int32(4)}); err != nil {
		t.Fatal(err)
	}
	var failed astypes.Activity
	eventually(t, "a failed launch", func() (bool, error) {
		out, err := c.asg.DescribeScalingActivities(t.Context(), &autoscaling.DescribeScalingActivitiesInput{AutoScalingGroupName: aws.String("g")})
		if err != nil {
			return false, err
		}
		for _, a := range out.Activities {
			if a.StatusCode == astypes.ScalingActivityStatusCodeFailed {
				failed = a
				return true, nil
			}
		}
		return false, nil
	})
	if msg := aws.ToString(failed.StatusMessage); !strings.Contains(msg, "Capacity Reservation "+cr) || !strings.HasSuffix(msg, "Launching EC2 instance failed.") {
		t.Errorf("failed activity's status message %q, want one naming the Capacity Reservation %s", msg, cr)
	}
	if used, left := s.ReservationUsage(cr); used != 2 || left != 0 || available(t, c, cr) != 0 {
		t.Errorf("reservation used %d, left %d (described %d), want 2, 0, 0", used, left, available(t, c, cr))
	}
	out, err := c.asg.DescribeAutoScalingGroups(t.Context(), &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{"g"}})
	if err != nil {
		t.Fatal(err)
	}
	ins := out.AutoScalingGroups[0].Instances
	if len(ins) != 2 || aws.ToInt32(out.AutoScalingGroups[0].DesiredCapacity) != 4 {
		t.Fatalf("%d instances, desired %d; want 2 launched into the reservation, desired 4", len(ins), aws.ToInt32(out.AutoScalingGroups[0].DesiredCapacity))
	}
	for _, in := range ins {
		if z := aws.ToString(in.AvailabilityZone); z != "us-east-1b" {
			t.Errorf("instance %s in %s, want the reservation's zone us-east-1b", aws.ToString(in.InstanceId), z)
		}
	}
	// Back to 2, then one terminated: its room comes back once it is gone.
	if _, err := c.asg.SetDesiredCapacity(t.Context(), &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String("g"),
		DesiredCapacity: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.asg.TerminateInstanceInAutoScalingGroup(t.Context(), &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		InstanceId: ins[0].InstanceId, ShouldDecrementDesiredCapacity: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the room given back", func() (bool, error) { return available(t, c, cr) == 1, nil })
}

// TestCapacityBlockLaunches: a capacity-block market type launches into
// the block it targets while the block is active; before its start the
// launch fails (IncorrectState) and nothing launches. An open ODCR is
// used by a template without a specification, which falls back to
// On-Demand once it is full.
func TestCapacityBlockLaunches(t *testing.T) {
	s := startFake(t)
	s.AddInstanceType(InstanceType{Name: "m5.large", VCPU: 2, MemoryMiB: 8192, MaxENIs: 3, IPv4PerENI: 10})
	s.AddSubnet("subnet-a", "us-east-1a")
	now := time.Now()
	soon := s.AddCapacityReservation(CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a", TotalInstanceCount: 1,
		ReservationType: "capacity-block", StartDate: now.Add(time.Hour), EndDate: now.Add(25 * time.Hour), InstanceMatchCriteria: "targeted"})
	ltSoon := s.AddLaunchTemplate(LaunchTemplate{Name: "block", Versions: []LaunchTemplateVersion{{Number: 1, InstanceType: "m5.large",
		MarketType: "capacity-block", CapacityReservation: &CapacityReservationSpec{TargetID: soon}}}})
	open := s.AddCapacityReservation(CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a", TotalInstanceCount: 1})
	plain := s.AddLaunchTemplate(LaunchTemplate{Name: "plain", Versions: []LaunchTemplateVersion{{Number: 1, InstanceType: "m5.large"}}})
	c := sdkClients(t, s)

	s.AddGroup(Group{Name: "block", Max: 5, Desired: 1, LaunchTemplate: &LaunchTemplateSpec{ID: ltSoon}, Subnets: []string{"subnet-a"}})
	s.AddGroup(Group{Name: "plain", Max: 5, Desired: 2, LaunchTemplate: &LaunchTemplateSpec{ID: plain}, Subnets: []string{"subnet-a"}})
	eventually(t, "the plain group's instances and the block group's failure", func() (bool, error) {
		out, err := c.asg.DescribeScalingActivities(t.Context(), &autoscaling.DescribeScalingActivitiesInput{AutoScalingGroupName: aws.String("block")})
		if err != nil || len(out.Activities) == 0 {
			return false, err
		}
		g, err := c.asg.DescribeAutoScalingGroups(t.Context(), &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{"plain"}})
		if err != nil {
			return false, err
		}
		return out.Activities[0].StatusCode == astypes.ScalingActivityStatusCodeFailed && len(g.AutoScalingGroups[0].Instances) == 2, nil
	})
	if used, _ := s.ReservationUsage(soon); used != 0 {
		t.Errorf("%d instances in a block that has not started, want 0", used)
	}
	if used, left := s.ReservationUsage(open); used != 1 || left != 0 {
		t.Errorf("open reservation used %d, left %d; want 1, 0 (the second instance On-Demand)", used, left)
	}
}
