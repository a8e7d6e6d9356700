package awsfake

import (
	"sort"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"
)

// launchOf is what DescribeAutoScalingGroups says an instance was launched
// with: "lt-id/name@version" or "lc:name".
func launchOf(t *testing.T, c clients, group string) map[string]string {
	t.Helper()
	out, err := c.asg.DescribeAutoScalingGroups(t.Context(), &autoscaling.DescribeAutoScalingGroupsInput{
		AutoScalingGroupNames: []string{group}})
	if err != nil || len(out.AutoScalingGroups) != 1 {
		t.Fatalf("DescribeAutoScalingGroups(%s): %v", group, err)
	}
	got := map[string]string{}
	for _, in := range out.AutoScalingGroups[0].Instances {
		switch lt := in.LaunchTemplate; {
		case lt != nil:
			got[aws.ToString(in.InstanceId)] = aws.ToString(lt.LaunchTemplateId) + "/" + aws.ToString(lt.LaunchTemplateName) + "@" + aws.ToString(lt.Version)
		default:
			got[aws.ToString(in.InstanceId)] = "lc:" + aws.ToString(in.LaunchConfigurationName)
		}
	}
	return got
}

// TestInstancesRememberTheirLaunch: an instance reports the launch template
// and version number it was launched with ($Latest and $Default resolved
// when it launched), or its launch configuration, whatever the group or
// the template became since.
func TestInstancesRememberTheirLaunch(t *testing.T) {
	s := startFake(t)
	s.AddInstanceType(InstanceType{Name: "m5.large", VCPU: 2, MemoryMiB: 8192, MaxENIs: 3, IPv4PerENI: 10})
	s.AddInstanceType(InstanceType{Name: "c5.large", VCPU: 2, MemoryMiB: 4096, MaxENIs: 3, IPv4PerENI: 10})
	id := s.AddLaunchTemplate(LaunchTemplate{Name: "workers", DefaultVersion: 1,
		Versions: []LaunchTemplateVersion{{Number: 1, InstanceType: "m5.large"}, {Number: 2, InstanceType: "m5.large"}}})
	s.AddLaunchConfiguration(LaunchConfiguration{Name: "old-lc", InstanceType: "m5.large"})
	c := sdkClients(t, s)

	s.AddGroup(Group{Name: "latest", Max: 5, Desired: 1, LaunchTemplate: &LaunchTemplateSpec{Name: "workers", Version: "$Latest"}})
	s.AddGroup(Group{Name: "lc", Max: 5, Desired: 1, LaunchConfigurationName: "old-lc"})
	eventually(t, "the first instances", func() (bool, error) {
		return len(launchOf(t, c, "latest")) == 1 && len(launchOf(t, c, "lc")) == 1, nil
	})
	for _, v := range launchOf(t, c, "latest") {
		if v != id+"/workers@2" {
			t.Errorf("instance of $Latest reports %q, want %q", v, id+"/workers@2")
		}
	}

	out, err := c.ec2.CreateLaunchTemplateVersion(t.Context(), &ec2.CreateLaunchTemplateVersionInput{
		LaunchTemplateId: aws.String(id), SourceVersion: aws.String("2"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{InstanceType: ec2types.InstanceType("c5.large")}})
	if err != nil {
		t.Fatal(err)
	}
	if v := out.LaunchTemplateVersion; aws.ToInt64(v.VersionNumber) != 3 || v.LaunchTemplateData.InstanceType != "c5.large" ||
		aws.ToBool(v.DefaultVersion) {
		t.Errorf("new version %d (%s, default %v), want 3 (c5.large, not default)", aws.ToInt64(v.VersionNumber),
			v.LaunchTemplateData.InstanceType, aws.ToBool(v.DefaultVersion))
	}
	if _, err := c.asg.SetDesiredCapacity(t.Context(), &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String("latest"),
		DesiredCapacity: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	// The group switches from its launch configuration to the template's default version.
	s.AddGroup(Group{Name: "lc", Max: 5, Desired: 2, LaunchTemplate: &LaunchTemplateSpec{ID: id, Version: "$Default"}})
	eventually(t, "the second instances", func() (bool, error) {
		return len(launchOf(t, c, "latest")) == 2 && len(launchOf(t, c, "lc")) == 2, nil
	})
	count := func(m map[string]string) map[string]int {
		out := map[string]int{}
		for _, v := range m {
			out[v]++
		}
		return out
	}
	if diff := cmp.Diff(map[string]int{id + "/workers@2": 1, id + "/workers@3": 1}, count(launchOf(t, c, "latest"))); diff != "" {
		t.Errorf("instances of $Latest (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"lc:old-lc": 1, id + "/workers@1": 1}, count(launchOf(t, c, "lc"))); diff != "" {
		t.Errorf("instances of the switched group (-want +got):\n%s", diff)
	}
	// The group itself still names $Latest; the instance types follow the versions.
	types := map[string]int{}
	for _, in := range s.Instances("latest") {
		types[in.InstanceType]++
	}
	if diff := cmp.Diff(map[string]int{"m5.large": 1, "c5.large": 1}, types); diff != "" {
		t.Errorf("instance types (-want +got):\n%s", diff)
	}
}

// TestDescribeAndModifyLaunchTemplates: DescribeLaunchTemplates reports
// the latest and default version numbers, by ID, by name or all (paged);
// ModifyLaunchTemplate moves the default; unknown templates and versions
// are AWS's errors.
func TestDescribeAndModifyLaunchTemplates(t *testing.T) {
	s := startFake(t)
	a := s.AddLaunchTemplate(LaunchTemplate{ID: "lt-a", Name: "a", DefaultVersion: 1,
		Versions: []LaunchTemplateVersion{{Number: 1}, {Number: 2}, {Number: 3}}})
	s.AddLaunchTemplate(LaunchTemplate{ID: "lt-b", Name: "b", Versions: []LaunchTemplateVersion{{Number: 1}}})
	s.AddLaunchTemplate(LaunchTemplate{ID: "lt-c", Name: "c", Versions: []LaunchTemplateVersion{{Number: 1}, {Number: 2}}})
	c := sdkClients(t, s, noRetries)
	describe := func(in *ec2.DescribeLaunchTemplatesInput) map[string][2]int64 {
		t.Helper()
		got := map[string][2]int64{}
		p := ec2.NewDescribeLaunchTemplatesPaginator(c.ec2, in)
		for p.HasMorePages() {
			out, err := p.NextPage(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for _, lt := range out.LaunchTemplates {
				got[aws.ToString(lt.LaunchTemplateId)+"/"+aws.ToString(lt.LaunchTemplateName)] =
					[2]int64{aws.ToInt64(lt.LatestVersionNumber), aws.ToInt64(lt.DefaultVersionNumber)}
			}
		}
		return got
	}
	want := map[string][2]int64{"lt-a/a": {3, 1}, "lt-b/b": {1, 1}}
	if diff := cmp.Diff(want, describe(&ec2.DescribeLaunchTemplatesInput{LaunchTemplateIds: []string{a},
		LaunchTemplateNames: []string{"b"}})); diff != "" {
		t.Errorf("by ID and name (-want +got):\n%s", diff)
	}
	want["lt-c/c"] = [2]int64{2, 1}
	if diff := cmp.Diff(want, describe(&ec2.DescribeLaunchTemplatesInput{MaxResults: aws.Int32(1)})); diff != "" {
		t.Errorf("all, one a page (-want +got):\n%s", diff)
	}

	if _, err := c.ec2.ModifyLaunchTemplate(t.Context(), &ec2.ModifyLaunchTemplateInput{LaunchTemplateName: aws.String("a"),
		DefaultVersion: aws.String("3")}); err != nil {
		t.Fatal(err)
	}
	if got := describe(&ec2.DescribeLaunchTemplatesInput{LaunchTemplateIds: []string{a}})["lt-a/a"]; got != [2]int64{3, 3} {
		t.Errorf("after ModifyLaunchTemplate: latest, default %v, want [3 3]", got)
	}
	vs, err := c.ec2.DescribeLaunchTemplateVersions(t.Context(), &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: aws.String(a),
		Versions: []string{"$Default"}})
	if err != nil || len(vs.LaunchTemplateVersions) != 1 || aws.ToInt64(vs.LaunchTemplateVersions[0].VersionNumber) != 3 {
		t.Errorf("$Default after ModifyLaunchTemplate: %v %v, want version 3", vs, err)
	}

	var codes []string
	for _, call := range []func() error{
		func() error {
			_, err := c.ec2.DescribeLaunchTemplates(t.Context(), &ec2.DescribeLaunchTemplatesInput{LaunchTemplateIds: []string{a, "lt-gone"}})
			return err
		},
		func() error {
			_, err := c.ec2.DescribeLaunchTemplates(t.Context(), &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{"gone"}})
			return err
		},
		func() error {
			_, err := c.ec2.ModifyLaunchTemplate(t.Context(), &ec2.ModifyLaunchTemplateInput{LaunchTemplateId: aws.String(a),
				DefaultVersion: aws.String("9")})
			return err
		},
		func() error {
			_, err := c.ec2.CreateLaunchTemplateVersion(t.Context(), &ec2.CreateLaunchTemplateVersionInput{LaunchTemplateId: aws.String(a),
				SourceVersion: aws.String("7"), LaunchTemplateData: &ec2types.RequestLaunchTemplateData{}})
			return err
		},
	} {
		codes = append(codes, apiErrorCode(call()))
	}
	sort.Strings(codes)
	wantCodes := []string{"InvalidLaunchTemplateId.NotFound", "InvalidLaunchTemplateId.VersionNotFound",
		"InvalidLaunchTemplateId.VersionNotFound", "InvalidLaunchTemplateName.NotFoundException"}
	if diff := cmp.Diff(wantCodes, codes); diff != "" {
		t.Errorf("error codes (-want +got):\n%s", diff)
	}
}
