package awsfake

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
)

// TestDesiredChangesAndFailedLaunches: the fake keeps when each
// SetDesiredCapacity changed a group, and when each failed launch
// activity started, for tests that time the autoscaler.
func TestDesiredChangesAndFailedLaunches(t *testing.T) {
	s := startFake(t)
	s.AddLaunchTemplate(LaunchTemplate{ID: "lt-1", Versions: []LaunchTemplateVersion{{Number: 1, InstanceType: "m5.large"}}})
	s.AddGroup(Group{Name: "g", Max: 4, LaunchTemplate: &LaunchTemplateSpec{ID: "lt-1"}})
	s.AddGroup(Group{Name: "other", Max: 4, LaunchTemplate: &LaunchTemplateSpec{ID: "lt-1"}})
	s.FailLaunchesWith("g", LaunchFailure{Code: "SpotMaxPriceTooLow", Message: "price", Form: FleetSpot})
	c := sdkClients(t, s)
	set := func(group string, n int32) {
		t.Helper()
		if _, err := c.asg.SetDesiredCapacity(t.Context(), &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String(group),
			DesiredCapacity: aws.Int32(n)}); err != nil {
			t.Fatal(err)
		}
	}
	set("g", 2)
	set("g", 2) // no change: not kept
	set("other", 1)
	got := s.DesiredChanges("g")
	if len(got) != 1 || got[0].From != 0 || got[0].To != 2 || got[0].At.IsZero() {
		t.Errorf("changes of g %+v, want one, 0 to 2", got)
	}
	if o := s.DesiredChanges("other"); len(o) != 1 || o[0].To != 1 {
		t.Errorf("changes of other %+v, want one to 1", o)
	}
	failed := s.FailedLaunches("g")
	if len(failed) == 0 || failed[0].Before(got[0].At) {
		t.Errorf("failed launches of g at %v, want at least one, after the increase at %v", failed, got[0].At)
	}
	if f := s.FailedLaunches("other"); len(f) != 0 {
		t.Errorf("failed launches of other %v, want none", f)
	}
}
