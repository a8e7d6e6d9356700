package awsfake

import (
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
)

// TestDescribeAutoScalingGroupsNameLimit: up to 50 names, or up to
// MaxRecords when that is larger, as AWS takes them.
func TestDescribeAutoScalingGroupsNameLimit(t *testing.T) {
	s := startFake(t)
	c := sdkClients(t, s, noRetries)
	var names []string
	for i := range 101 {
		names = append(names, fmt.Sprintf("g-%03d", i))
	}
	for _, tc := range []struct {
		names   int
		max     int32
		wantErr bool
	}{{50, 0, false}, {51, 0, true}, {100, 100, false}, {51, 60, false}, {101, 100, true}} {
		in := &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: names[:tc.names]}
		if tc.max > 0 {
			in.MaxRecords = aws.Int32(tc.max)
		}
		_, err := c.asg.DescribeAutoScalingGroups(t.Context(), in)
		if got := apiErrorCode(err); (got == "ValidationError") != tc.wantErr {
			t.Errorf("%d names, MaxRecords %d: error %v, want a ValidationError %t", tc.names, tc.max, err, tc.wantErr)
		}
	}
}

// TestDeleteGroup: a deleted group is no longer described and its
// instances are terminated.
func TestDeleteGroup(t *testing.T) {
	s := startFake(t)
	s.AddLaunchConfiguration(LaunchConfiguration{Name: "lc", InstanceType: "m5.large"})
	s.AddInstanceType(InstanceType{Name: "m5.large", VCPU: 2, MemoryMiB: 8192, Arch: "x86_64"})
	s.AddGroup(Group{Name: "gone", Max: 3, Desired: 2, LaunchConfigurationName: "lc"})
	s.AddGroup(Group{Name: "kept", Max: 3, Desired: 1, LaunchConfigurationName: "lc"})
	before := s.Instances("gone")
	if len(before) != 2 {
		t.Fatalf("%d instances before the deletion, want 2", len(before))
	}
	s.DeleteGroup("gone")
	c := sdkClients(t, s, noRetries)
	out, err := c.asg.DescribeAutoScalingGroups(t.Context(), &autoscaling.DescribeAutoScalingGroupsInput{
		AutoScalingGroupNames: []string{"gone", "kept"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.AutoScalingGroups) != 1 || aws.ToString(out.AutoScalingGroups[0].AutoScalingGroupName) != "kept" {
		t.Errorf("described %d groups after the deletion, want only kept", len(out.AutoScalingGroups))
	}
	for _, b := range before {
		if in, _ := s.Instance(b.ID); in.Lifecycle != LifecycleTerminated {
			t.Errorf("instance %s of the deleted group is %q, want Terminated", b.ID, in.Lifecycle)
		}
	}
	if n := len(s.Instances("kept")); n != 1 {
		t.Errorf("the other group has %d instances, want 1", n)
	}
}
