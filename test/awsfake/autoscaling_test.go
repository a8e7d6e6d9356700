package awsfake

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/google/go-cmp/cmp"
)

func TestDescribeAutoScalingGroupsPaginatesOverHundredGroups(t *testing.T) {
	s := startFake(t)
	for i := range 250 {
		tags := map[string]string{}
		if i%2 == 0 {
			tags["k8s.io/cluster-autoscaler/enabled"] = "true"
		}
		s.AddGroup(Group{Name: fmt.Sprintf("asg-%03d", i), Max: 10, Tags: tags})
	}
	c := sdkClients(t, s)
	tests := []struct {
		name      string
		input     *autoscaling.DescribeAutoScalingGroupsInput
		wantGroup int
		wantPages int
	}{
		{name: "max records 100", input: &autoscaling.DescribeAutoScalingGroupsInput{MaxRecords: aws.Int32(100)}, wantGroup: 250, wantPages: 3},
		{name: "default page size 50", input: &autoscaling.DescribeAutoScalingGroupsInput{}, wantGroup: 250, wantPages: 5},
		{name: "tag filter over pages", input: &autoscaling.DescribeAutoScalingGroupsInput{
			MaxRecords: aws.Int32(100),
			Filters:    []astypes.Filter{{Name: aws.String("tag-key"), Values: []string{"k8s.io/cluster-autoscaler/enabled"}}},
		}, wantGroup: 125, wantPages: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := autoscaling.NewDescribeAutoScalingGroupsPaginator(c.asg, tc.input)
			seen := map[string]bool{}
			pages := 0
			for p.HasMorePages() {
				out, err := p.NextPage(t.Context())
				if err != nil {
					t.Fatalf("page %d: %v", pages, err)
				}
				pages++
				for _, g := range out.AutoScalingGroups {
					name := aws.ToString(g.AutoScalingGroupName)
					if seen[name] {
						t.Errorf("group %s listed twice", name)
					}
					seen[name] = true
				}
			}
			if len(seen) != tc.wantGroup || pages != tc.wantPages {
				t.Errorf("got %d groups in %d pages, want %d in %d", len(seen), pages, tc.wantGroup, tc.wantPages)
			}
		})
	}
	if _, err := c.asg.DescribeAutoScalingGroups(t.Context(), &autoscaling.DescribeAutoScalingGroupsInput{MaxRecords: aws.Int32(101)}); apiErrorCode(err) != "ValidationError" {
		t.Errorf("MaxRecords 101: got %v, want ValidationError", err)
	}
	if _, err := c.asg.DescribeAutoScalingGroups(t.Context(), &autoscaling.DescribeAutoScalingGroupsInput{NextToken: aws.String("garbage!")}); apiErrorCode(err) != "InvalidNextToken" {
		t.Errorf("bad NextToken: got %v, want InvalidNextToken", err)
	}
}

func TestDescribeAutoScalingGroupsTagFilters(t *testing.T) {
	s := startFake(t)
	s.AddGroup(Group{Name: "a", Max: 1, Tags: map[string]string{"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/c1": "owned"}})
	s.AddGroup(Group{Name: "b", Max: 1, Tags: map[string]string{"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/c2": "owned"}})
	s.AddGroup(Group{Name: "c", Max: 1, Tags: map[string]string{"k8s.io/cluster-autoscaler/enabled": "false"}})
	s.AddGroup(Group{Name: "d", Max: 1})
	c := sdkClients(t, s)
	f := func(name string, values ...string) astypes.Filter {
		return astypes.Filter{Name: aws.String(name), Values: values}
	}
	tests := []struct {
		name    string
		names   []string
		filters []astypes.Filter
		want    []string
	}{
		{name: "no filter", want: []string{"a", "b", "c", "d"}},
		{name: "tag-key", filters: []astypes.Filter{f("tag-key", "k8s.io/cluster-autoscaler/enabled")}, want: []string{"a", "b", "c"}},
		{name: "tag-key any of", filters: []astypes.Filter{f("tag-key", "k8s.io/cluster-autoscaler/c1", "k8s.io/cluster-autoscaler/c2")}, want: []string{"a", "b"}},
		{name: "two tag-key filters are ANDed", filters: []astypes.Filter{
			f("tag-key", "k8s.io/cluster-autoscaler/enabled"), f("tag-key", "k8s.io/cluster-autoscaler/c2")}, want: []string{"b"}},
		{name: "tag-value", filters: []astypes.Filter{f("tag-value", "false")}, want: []string{"c"}},
		{name: "tag:key", filters: []astypes.Filter{f("tag:k8s.io/cluster-autoscaler/enabled", "true")}, want: []string{"a", "b"}},
		{name: "names and filter", names: []string{"a", "c", "d"}, filters: []astypes.Filter{f("tag-key", "k8s.io/cluster-autoscaler/enabled")}, want: []string{"a", "c"}},
		{name: "unknown name", names: []string{"zz"}, want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := c.asg.DescribeAutoScalingGroups(t.Context(), &autoscaling.DescribeAutoScalingGroupsInput{
				AutoScalingGroupNames: tc.names, Filters: tc.filters,
			})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, g := range out.AutoScalingGroups {
				got = append(got, aws.ToString(g.AutoScalingGroupName))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("groups (-want +got):\n%s", diff)
			}
		})
	}
	out, err := c.asg.DescribeAutoScalingGroups(t.Context(), &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	tags := map[string]string{}
	for _, tg := range out.AutoScalingGroups[0].Tags {
		tags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
		if aws.ToString(tg.ResourceId) != "a" || aws.ToString(tg.ResourceType) != "auto-scaling-group" {
			t.Errorf("tag %s: resource %s/%s", aws.ToString(tg.Key), aws.ToString(tg.ResourceType), aws.ToString(tg.ResourceId))
		}
	}
	if diff := cmp.Diff(map[string]string{"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/c1": "owned"}, tags); diff != "" {
		t.Errorf("tags (-want +got):\n%s", diff)
	}
}

func TestSetDesiredCapacityLaunchesPendingThenInService(t *testing.T) {
	s := startFake(t)
	s.AddSubnet("subnet-a", "us-east-1a")
	s.AddSubnet("subnet-b", "us-east-1b")
	lt := s.AddLaunchTemplate(LaunchTemplate{Name: "nodes", DefaultVersion: 1, Versions: []LaunchTemplateVersion{{Number: 1, InstanceType: "m5.large"}}})
	s.AddGroup(Group{Name: "g", Min: 0, Max: 5, LaunchTemplate: &LaunchTemplateSpec{ID: lt, Version: "$Default"}, Subnets: []string{"subnet-a", "subnet-b"}})
	s.SetStartDelay(time.Hour)
	c := sdkClients(t, s)
	if _, err := c.asg.SetDesiredCapacity(t.Context(), &autoscaling.SetDesiredCapacityInput{
		AutoScalingGroupName: aws.String("g"), DesiredCapacity: aws.Int32(3),
	}); err != nil {
		t.Fatalf("SetDesiredCapacity: %v", err)
	}
	g := describeGroup(t, c, "g")
	if g.desired != 3 || len(g.states) != 3 {
		t.Fatalf("after SetDesiredCapacity(3): desired %d, %d instances, want 3 and 3", g.desired, len(g.states))
	}
	for id, st := range g.states {
		if st != LifecyclePending {
			t.Errorf("instance %s is %s, want Pending", id, st)
		}
		if len(id) != len("i-")+17 || !strings.HasPrefix(id, "i-") {
			t.Errorf("instance ID %q is not i- and 17 hex digits", id)
		}
	}
	zones := map[string]int{}
	for _, in := range s.Instances("g") {
		zones[in.Zone]++
		if in.InstanceType != "m5.large" {
			t.Errorf("instance %s type %s, want m5.large (launch template)", in.ID, in.InstanceType)
		}
	}
	if zones["us-east-1a"] == 0 || zones["us-east-1b"] == 0 {
		t.Errorf("zones %v: want launches spread over both subnets' zones", zones)
	}
	s.SetStartDelay(0)
	eventually(t, "instances InService", func() (bool, error) {
		for _, st := range describeGroup(t, c, "g").states {
			if st != LifecycleInService {
				return false, nil
			}
		}
		return true, nil
	})
	acts, err := c.asg.DescribeScalingActivities(t.Context(), &autoscaling.DescribeScalingActivitiesInput{AutoScalingGroupName: aws.String("g")})
	if err != nil {
		t.Fatal(err)
	}
	if len(acts.Activities) != 3 {
		t.Fatalf("%d activities, want 3 launches", len(acts.Activities))
	}
	for _, a := range acts.Activities {
		if a.StatusCode != astypes.ScalingActivityStatusCodeSuccessful || !strings.HasPrefix(aws.ToString(a.Description), "Launching a new EC2 instance: i-") {
			t.Errorf("activity %q: %s, want a successful launch", aws.ToString(a.Description), a.StatusCode)
		}
	}
	for _, tc := range []struct {
		desired int32
		want    string
	}{{6, "above max value 5"}, {-1, "below min value 0"}} {
		_, err := c.asg.SetDesiredCapacity(t.Context(), &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String("g"), DesiredCapacity: aws.Int32(tc.desired)})
		if apiErrorCode(err) != "ValidationError" || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("SetDesiredCapacity(%d): %v, want ValidationError %q", tc.desired, err, tc.want)
		}
	}
	if _, err := c.asg.SetDesiredCapacity(t.Context(), &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String("nope"), DesiredCapacity: aws.Int32(1)}); apiErrorCode(err) != "ValidationError" {
		t.Errorf("SetDesiredCapacity of an unknown group: %v, want ValidationError", err)
	}
}

func TestTerminateInstanceInAutoScalingGroup(t *testing.T) {
	s := startFake(t)
	s.AddLaunchConfiguration(LaunchConfiguration{Name: "lc", InstanceType: "c5.xlarge"})
	s.AddGroup(Group{Name: "g", Min: 1, Max: 5, Desired: 3, LaunchConfigurationName: "lc"})
	c := sdkClients(t, s)
	ids := func() []string {
		var out []string
		for _, in := range s.Instances("g") {
			out = append(out, in.ID)
		}
		return out
	}
	start := ids()
	if len(start) != 3 {
		t.Fatalf("%d instances, want 3", len(start))
	}
	out, err := c.asg.TerminateInstanceInAutoScalingGroup(t.Context(), &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		InstanceId: aws.String(start[1]), ShouldDecrementDesiredCapacity: aws.Bool(true),
	})
	if err != nil {
		t.Fatalf("terminate with decrement: %v", err)
	}
	if out.Activity == nil || !strings.Contains(aws.ToString(out.Activity.Description), start[1]) {
		t.Errorf("activity %+v does not name %s", out.Activity, start[1])
	}
	g := describeGroup(t, c, "g")
	if g.desired != 2 {
		t.Errorf("desired %d after decrementing terminate, want 2", g.desired)
	}
	if diff := cmp.Diff([]string{start[0], start[2]}, ids()); diff != "" {
		t.Errorf("instances after terminate (-want +got):\n%s", diff)
	}
	// Without decrement the group replaces the instance.
	if _, err := c.asg.TerminateInstanceInAutoScalingGroup(t.Context(), &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		InstanceId: aws.String(start[0]), ShouldDecrementDesiredCapacity: aws.Bool(false),
	}); err != nil {
		t.Fatalf("terminate without decrement: %v", err)
	}
	after := ids()
	if len(after) != 2 || after[0] != start[2] || after[1] == start[0] {
		t.Errorf("instances %v after terminate without decrement: want %s and a replacement", after, start[2])
	}
	// Down to min, then refused.
	if _, err := c.asg.TerminateInstanceInAutoScalingGroup(t.Context(), &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		InstanceId: aws.String(after[1]), ShouldDecrementDesiredCapacity: aws.Bool(true),
	}); err != nil {
		t.Fatalf("terminate to min: %v", err)
	}
	_, err = c.asg.TerminateInstanceInAutoScalingGroup(t.Context(), &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		InstanceId: aws.String(after[0]), ShouldDecrementDesiredCapacity: aws.Bool(true),
	})
	if apiErrorCode(err) != "ValidationError" || !strings.Contains(err.Error(), "min size") {
		t.Errorf("terminate below min: %v, want ValidationError about the min size", err)
	}
	if n := len(ids()); n != 1 || s.GroupState("g").Desired != 1 {
		t.Errorf("after the refused terminate: %d instances, desired %d; want 1 and 1", n, s.GroupState("g").Desired)
	}
	_, err = c.asg.TerminateInstanceInAutoScalingGroup(t.Context(), &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		InstanceId: aws.String(start[1]), ShouldDecrementDesiredCapacity: aws.Bool(true),
	})
	if apiErrorCode(err) != "ValidationError" {
		t.Errorf("terminate of a terminated instance: %v, want ValidationError", err)
	}
	if diff := cmp.Diff([]string{start[1], start[0], after[1]}, s.Terminated()); diff != "" {
		t.Errorf("Terminated() (-want +got):\n%s", diff)
	}
}

func TestFailedLaunchesAreFailedScalingActivities(t *testing.T) {
	s := startFake(t)
	s.AddLaunchConfiguration(LaunchConfiguration{Name: "lc", InstanceType: "p3.2xlarge"})
	s.AddGroup(Group{Name: "gpu", Max: 4, LaunchConfigurationName: "lc"})
	s.FailLaunches("gpu", "InsufficientInstanceCapacity", "We currently do not have sufficient p3.2xlarge capacity in the Availability Zone you requested")
	c := sdkClients(t, s)
	if _, err := c.asg.SetDesiredCapacity(t.Context(), &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String("gpu"), DesiredCapacity: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	g := describeGroup(t, c, "gpu")
	if g.desired != 2 || len(g.states) != 0 {
		t.Errorf("desired %d with %d instances, want 2 with none", g.desired, len(g.states))
	}
	out, err := c.asg.DescribeScalingActivities(t.Context(), &autoscaling.DescribeScalingActivitiesInput{AutoScalingGroupName: aws.String("gpu"), MaxRecords: aws.Int32(10)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Activities) == 0 {
		t.Fatal("no scaling activity for the failed launch")
	}
	a := out.Activities[0]
	if a.StatusCode != astypes.ScalingActivityStatusCodeFailed || !strings.Contains(aws.ToString(a.StatusMessage), "InsufficientInstanceCapacity") {
		t.Errorf("newest activity: %s %q, want Failed with the code in the message", a.StatusCode, aws.ToString(a.StatusMessage))
	}
	if a.StartTime == nil || a.EndTime == nil {
		t.Errorf("failed activity without start/end time: %+v", a)
	}
	s.FailLaunches("gpu", "", "")
	eventually(t, "launches after clearing the failure", func() (bool, error) { return len(s.Instances("gpu")) == 2, nil })
	out, err = c.asg.DescribeScalingActivities(t.Context(), &autoscaling.DescribeScalingActivitiesInput{AutoScalingGroupName: aws.String("gpu")})
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, a := range out.Activities {
		codes = append(codes, string(a.StatusCode))
	}
	if diff := cmp.Diff([]string{"Successful", "Successful", "Failed"}, codes); diff != "" {
		t.Errorf("activities newest first (-want +got):\n%s", diff)
	}
}

func TestDescribeScalingActivitiesPaginates(t *testing.T) {
	s := startFake(t)
	s.AddLaunchConfiguration(LaunchConfiguration{Name: "lc", InstanceType: "m5.large"})
	s.AddGroup(Group{Name: "g", Max: 30, Desired: 25, LaunchConfigurationName: "lc"})
	s.AddGroup(Group{Name: "other", Max: 5, Desired: 2, LaunchConfigurationName: "lc"})
	c := sdkClients(t, s)
	p := autoscaling.NewDescribeScalingActivitiesPaginator(c.asg, &autoscaling.DescribeScalingActivitiesInput{
		AutoScalingGroupName: aws.String("g"), MaxRecords: aws.Int32(10),
	})
	var got []string
	pages := 0
	for p.HasMorePages() {
		out, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, a := range out.Activities {
			if aws.ToString(a.AutoScalingGroupName) != "g" {
				t.Errorf("activity of group %s", aws.ToString(a.AutoScalingGroupName))
			}
			got = append(got, aws.ToString(a.ActivityId))
		}
	}
	sorted := append([]string(nil), got...)
	sort.Strings(sorted)
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			t.Errorf("activity %s listed twice", sorted[i])
		}
	}
	if len(got) != 25 || pages != 3 {
		t.Errorf("%d activities in %d pages, want 25 in 3", len(got), pages)
	}
}

func TestDescribeLaunchConfigurationsAndAutoScalingInstances(t *testing.T) {
	s := startFake(t)
	s.AddSubnet("subnet-1", "us-east-1c")
	s.AddLaunchConfiguration(LaunchConfiguration{Name: "lc-1", InstanceType: "t3.medium"})
	s.AddLaunchConfiguration(LaunchConfiguration{Name: "lc-2", InstanceType: "t3.large"})
	s.AddGroup(Group{Name: "g", Max: 3, Desired: 2, LaunchConfigurationName: "lc-2", Subnets: []string{"subnet-1"}})
	c := sdkClients(t, s)
	lcs, err := c.asg.DescribeLaunchConfigurations(t.Context(), &autoscaling.DescribeLaunchConfigurationsInput{LaunchConfigurationNames: []string{"lc-2"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(lcs.LaunchConfigurations) != 1 || aws.ToString(lcs.LaunchConfigurations[0].InstanceType) != "t3.large" {
		t.Errorf("launch configurations %+v, want lc-2 with t3.large", lcs.LaunchConfigurations)
	}
	insts := s.Instances("g")
	out, err := c.asg.DescribeAutoScalingInstances(t.Context(), &autoscaling.DescribeAutoScalingInstancesInput{InstanceIds: []string{insts[1].ID, "i-00000000000000000"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.AutoScalingInstances) != 1 {
		t.Fatalf("%d instances, want 1 (unknown IDs are left out)", len(out.AutoScalingInstances))
	}
	got := out.AutoScalingInstances[0]
	want := []string{insts[1].ID, "g", "us-east-1c", "t3.large", "lc-2", "InService"}
	if diff := cmp.Diff(want, []string{aws.ToString(got.InstanceId), aws.ToString(got.AutoScalingGroupName), aws.ToString(got.AvailabilityZone),
		aws.ToString(got.InstanceType), aws.ToString(got.LaunchConfigurationName), aws.ToString(got.LifecycleState)}); diff != "" {
		t.Errorf("instance (-want +got):\n%s", diff)
	}
}

func TestLaunchesOfBrokenLaunchSettingsFail(t *testing.T) {
	s := startFake(t)
	lt := s.AddLaunchTemplate(LaunchTemplate{Name: "t", DefaultVersion: 1, Versions: []LaunchTemplateVersion{{Number: 1, InstanceType: "m5.large"}}})
	s.AddGroup(Group{Name: "no-such-id", Max: 2, Desired: 1, LaunchTemplate: &LaunchTemplateSpec{ID: "lt-0000000000000000a"}})
	s.AddGroup(Group{Name: "no-such-name", Max: 2, Desired: 1, MixedInstances: &MixedInstancesPolicy{
		LaunchTemplate: LaunchTemplateSpec{Name: "nope"}, Overrides: []string{"c5.large"}}})
	s.AddGroup(Group{Name: "no-such-version", Max: 2, Desired: 1, LaunchTemplate: &LaunchTemplateSpec{ID: lt, Version: "7"}})
	s.AddGroup(Group{Name: "no-such-lc", Max: 2, Desired: 1, LaunchConfigurationName: "gone"})
	c := sdkClients(t, s)
	for group, code := range map[string]string{
		"no-such-id": "InvalidLaunchTemplateId.NotFound", "no-such-name": "InvalidLaunchTemplateName.NotFoundException",
		"no-such-version": "InvalidLaunchTemplateId.VersionNotFound", "no-such-lc": "ValidationError",
	} {
		out, err := c.asg.DescribeScalingActivities(t.Context(), &autoscaling.DescribeScalingActivitiesInput{AutoScalingGroupName: aws.String(group)})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Activities) != 1 || out.Activities[0].StatusCode != astypes.ScalingActivityStatusCodeFailed ||
			!strings.Contains(aws.ToString(out.Activities[0].StatusMessage), code) {
			t.Errorf("group %s: activities %+v, want one Failed naming %s", group, out.Activities, code)
		}
		if n := len(s.Instances(group)); n != 0 {
			t.Errorf("group %s: %d instances, want none", group, n)
		}
	}
	// A further increase is attempted (and fails) at once.
	if _, err := c.asg.SetDesiredCapacity(t.Context(), &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String("no-such-lc"), DesiredCapacity: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	out, err := c.asg.DescribeScalingActivities(t.Context(), &autoscaling.DescribeScalingActivitiesInput{AutoScalingGroupName: aws.String("no-such-lc")})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Activities) != 2 {
		t.Errorf("%d activities after a second increase, want 2 failed ones", len(out.Activities))
	}
}

func TestLoweringDesiredCapacityTerminatesAcrossZones(t *testing.T) {
	s := startFake(t)
	s.AddSubnet("subnet-a", "us-east-1a")
	s.AddSubnet("subnet-b", "us-east-1b")
	s.AddLaunchConfiguration(LaunchConfiguration{Name: "lc", InstanceType: "m5.large"})
	s.AddGroup(Group{Name: "g", Max: 10, Desired: 4, LaunchConfigurationName: "lc", Subnets: []string{"subnet-a", "subnet-b"}})
	c := sdkClients(t, s)
	if _, err := c.asg.SetDesiredCapacity(t.Context(), &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String("g"), DesiredCapacity: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	zones := map[string]int{}
	for _, in := range s.Instances("g") {
		zones[in.Zone]++
	}
	if diff := cmp.Diff(map[string]int{"us-east-1a": 1, "us-east-1b": 1}, zones); diff != "" {
		t.Errorf("instances per zone after scale-in (-want +got):\n%s", diff)
	}
	if got := s.Terminated(); len(got) != 0 {
		t.Errorf("Terminated() = %v, want only TerminateInstanceInAutoScalingGroup's", got)
	}
}
