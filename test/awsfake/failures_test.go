package awsfake

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
)

// TestFailedLaunchStatusForms: each FailLaunchesWith form words the failed
// activity's StatusMessage (and Description) as Auto Scaling does, read
// through the SDK.
func TestFailedLaunchStatusForms(t *testing.T) {
	const ice = "We currently do not have sufficient m5.large capacity in the Availability Zone you requested (us-east-1a). " +
		"Our system will be working on provisioning additional capacity. You can currently get m5.large capacity by not " +
		"specifying an Availability Zone in your request or choosing us-east-1b, us-east-1c."
	cases := []struct {
		name string
		f    LaunchFailure
		want string
	}{
		{"launch template group: EC2's message without the code", LaunchFailure{Code: "InsufficientInstanceCapacity", Message: ice, Form: Plain},
			ice + " Launching EC2 instance failed."},
		{"mixed instances, On-Demand (the default form)", LaunchFailure{Code: "InsufficientInstanceCapacity", Message: ice},
			"Could not launch On-Demand Instances. InsufficientInstanceCapacity - " + ice + " Launching EC2 instance failed."},
		{"mixed instances, Spot", LaunchFailure{Code: "InsufficientInstanceCapacity", Message: "There is no Spot capacity available that matches your request", Form: FleetSpot},
			"Could not launch Spot Instances. InsufficientInstanceCapacity - There is no Spot capacity available that matches your request. Launching EC2 instance failed."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := startFake(t)
			s.AddLaunchTemplate(LaunchTemplate{ID: "lt-1", Versions: []LaunchTemplateVersion{{Number: 1, InstanceType: "m5.large"}}})
			s.AddGroup(Group{Name: "g", Max: 4, LaunchTemplate: &LaunchTemplateSpec{ID: "lt-1"}})
			s.FailLaunchesWith("g", tc.f)
			c := sdkClients(t, s)
			if _, err := c.asg.SetDesiredCapacity(t.Context(), &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String("g"),
				DesiredCapacity: aws.Int32(1)}); err != nil {
				t.Fatal(err)
			}
			out, err := c.asg.DescribeScalingActivities(t.Context(), &autoscaling.DescribeScalingActivitiesInput{AutoScalingGroupName: aws.String("g")})
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Activities) == 0 {
				t.Fatal("no scaling activity for the failed launch")
			}
			a := out.Activities[0]
			if a.StatusCode != astypes.ScalingActivityStatusCodeFailed || aws.ToString(a.StatusMessage) != tc.want {
				t.Errorf("activity %s\n  status message %q\n  want           %q", a.StatusCode, aws.ToString(a.StatusMessage), tc.want)
			}
			if d := aws.ToString(a.Description); d != "Launching a new EC2 instance.  Status Reason: "+tc.want {
				t.Errorf("description %q, want the status reason quoted", d)
			}
		})
	}
}
