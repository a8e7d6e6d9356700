package aws

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"
)

func asg(name string, min, max, desired int32) astypes.AutoScalingGroup {
	return astypes.AutoScalingGroup{AutoScalingGroupName: aws.String(name), MinSize: aws.Int32(min), MaxSize: aws.Int32(max),
		DesiredCapacity: aws.Int32(desired)}
}

func TestDescribeGroup(t *testing.T) {
	mixed := asg("mixed", 0, 10, 2)
	mixed.MixedInstancesPolicy = &astypes.MixedInstancesPolicy{LaunchTemplate: &astypes.LaunchTemplate{
		LaunchTemplateSpecification: &astypes.LaunchTemplateSpecification{LaunchTemplateName: aws.String("lt"), Version: aws.String("$Latest")},
		Overrides:                   []astypes.LaunchTemplateOverrides{{InstanceType: aws.String("c5.large")}, {InstanceType: aws.String("m5.large")}}}}
	mixed.VPCZoneIdentifier = aws.String("subnet-b, subnet-a")
	mixed.Instances = []astypes.Instance{
		{InstanceId: aws.String("i-2"), AvailabilityZone: aws.String("us-east-1b"), LifecycleState: astypes.LifecycleStatePending, InstanceType: aws.String("c5.large")},
		{InstanceId: aws.String("i-1"), AvailabilityZone: aws.String("us-east-1a"), LifecycleState: astypes.LifecycleStateInService},
		{InstanceId: aws.String("i-3"), AvailabilityZone: aws.String("us-east-1a"), LifecycleState: astypes.LifecycleStateTerminating},
	}
	mixed.Tags = []astypes.TagDescription{{Key: aws.String("k"), Value: aws.String("v")}}
	withDup := asg("dup", 0, 3, 2)
	withDup.Instances = []astypes.Instance{{InstanceId: aws.String("i-1")}, {InstanceId: aws.String("i-1")}}
	noLT := asg("nolt", 0, 3, 0)
	noLT.LaunchTemplate = &astypes.LaunchTemplateSpecification{Version: aws.String("1")}
	cases := []struct {
		name     string
		in       astypes.AutoScalingGroup
		want     groupDesc
		wantLive int
		wantErr  bool
	}{
		{
			name: "mixed instances policy",
			in:   mixed,
			want: groupDesc{Name: "mixed", Min: 0, Max: 10, Desired: 2, Tags: map[string]string{"k": "v"},
				LaunchTemplate: &launchTemplateRef{Name: "lt", Version: "$Latest"}, Mixed: true, Distribution: instancesDistribution{Set: true, OnDemandPercent: 100},
				MixedOverrides: []string{"c5.large", "m5.large"}, Subnets: []string{"subnet-b", "subnet-a"},
				Instances: []instanceDesc{{ID: "i-1", Zone: "us-east-1a", Lifecycle: "InService"},
					{ID: "i-2", Zone: "us-east-1b", Lifecycle: "Pending", Type: "c5.large"},
					{ID: "i-3", Zone: "us-east-1a", Lifecycle: "Terminating"}}},
			wantLive: 2,
		},
		{name: "no name", in: asg("", 0, 1, 0), wantErr: true},
		{name: "min above max", in: asg("x", 3, 1, 1), wantErr: true},
		{name: "desired above max", in: asg("x", 0, 1, 2), wantErr: true},
		{name: "negative min", in: asg("x", -1, 1, 0), wantErr: true},
		{name: "missing sizes", in: astypes.AutoScalingGroup{AutoScalingGroupName: aws.String("x")}, wantErr: true},
		{name: "duplicate instance", in: withDup, wantErr: true},
		{name: "launch template without id or name", in: noLT, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := describeGroup(tc.in)
			if tc.wantErr {
				if !errors.Is(err, ErrBadDescription) {
					t.Fatalf("error = %v, want ErrBadDescription", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("description (-want +got):\n%s", d)
			}
			if live := got.live(); live != tc.wantLive {
				t.Errorf("live = %d, want %d", live, tc.wantLive)
			}
		})
	}
}

func TestDescribeInstanceType(t *testing.T) {
	info := func(name string, vcpu int32, mib int64) ec2types.InstanceTypeInfo {
		return ec2types.InstanceTypeInfo{InstanceType: ec2types.InstanceType(name), VCpuInfo: &ec2types.VCpuInfo{DefaultVCpus: aws.Int32(vcpu)},
			MemoryInfo: &ec2types.MemoryInfo{SizeInMiB: aws.Int64(mib)}}
	}
	m5 := info("m5.large", 2, 8192)
	m5.NetworkInfo = &ec2types.NetworkInfo{MaximumNetworkInterfaces: aws.Int32(3), Ipv4AddressesPerInterface: aws.Int32(10)}
	g5 := info("g5.12xlarge", 48, 196608)
	g5.ProcessorInfo = &ec2types.ProcessorInfo{SupportedArchitectures: []ec2types.ArchitectureType{ec2types.ArchitectureTypeX8664}}
	g5.GpuInfo = &ec2types.GpuInfo{Gpus: []ec2types.GpuDeviceInfo{{Count: aws.Int32(4), Manufacturer: aws.String("NVIDIA"), Name: aws.String("A10G")}}}
	arm := info("m6g.large", 2, 8192)
	arm.ProcessorInfo = &ec2types.ProcessorInfo{SupportedArchitectures: []ec2types.ArchitectureType{ec2types.ArchitectureTypeArm64}}
	badGPU := info("x", 2, 1024)
	badGPU.GpuInfo = &ec2types.GpuInfo{Gpus: []ec2types.GpuDeviceInfo{{Count: aws.Int32(-2)}}}
	cases := []struct {
		name    string
		in      ec2types.InstanceTypeInfo
		want    instanceType
		wantErr bool
	}{
		{name: "max pods from ENIs: 3*(10-1)+2", in: m5, want: instanceType{Name: "m5.large", VCPU: 2, MemoryMiB: 8192, Arch: "amd64", MaxPods: 29}},
		{name: "GPUs", in: g5, want: instanceType{Name: "g5.12xlarge", VCPU: 48, MemoryMiB: 196608, Arch: "amd64", GPUs: 4,
			GPUManufacturer: "NVIDIA", GPUName: "A10G"}},
		{name: "arm64", in: arm, want: instanceType{Name: "m6g.large", VCPU: 2, MemoryMiB: 8192, Arch: "arm64"}},
		{name: "no vCPUs", in: info("x", 0, 1024), wantErr: true},
		{name: "no memory", in: info("x", 2, 0), wantErr: true},
		{name: "no name", in: info("", 2, 1024), wantErr: true},
		{name: "negative GPUs", in: badGPU, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := describeInstanceType(tc.in)
			if tc.wantErr {
				if !errors.Is(err, ErrBadDescription) {
					t.Fatalf("error = %v, want ErrBadDescription", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("instance type (-want +got):\n%s", d)
			}
		})
	}
}

func TestParseDiscoverers(t *testing.T) {
	cases := []struct {
		spec    string
		want    map[string]string
		wantErr string
	}{
		{spec: "asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/prod", want: map[string]string{
			"k8s.io/cluster-autoscaler/enabled": "", "k8s.io/cluster-autoscaler/prod": ""}},
		{spec: "asg:tag=team=ml,env", want: map[string]string{"team": "ml", "env": ""}},
		{spec: "mig:namePrefix=x", wantErr: "asg:tag="},
		{spec: "asg:name=x", wantErr: "want asg:tag="},
		{spec: "asg:tag=a,,b", wantErr: "empty tag key"},
		{spec: "asg:tag=a,a=1", wantErr: "twice"},
	}
	for _, tc := range cases {
		t.Run(tc.spec, func(t *testing.T) {
			got, err := parseDiscoverers([]string{tc.spec})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got[0].Tags); d != "" {
				t.Errorf("tags (-want +got):\n%s", d)
			}
		})
	}
	d, _ := parseDiscoverer("asg:tag=team=ml,env")
	if d.matches(map[string]string{"team": "ops", "env": "x"}) || d.matches(map[string]string{"team": "ml"}) ||
		!d.matches(map[string]string{"team": "ml", "env": "", "other": "1"}) {
		t.Error("matches does not require every tag, with its value where given")
	}
	var names []string
	for _, f := range d.filters() {
		names = append(names, aws.ToString(f.Name)+"="+strings.Join(f.Values, "|"))
	}
	if diff := cmp.Diff([]string{"tag-key=env", "tag:team=ml"}, names); diff != "" {
		t.Errorf("filters (-want +got):\n%s", diff)
	}
}

func TestParseNodeGroups(t *testing.T) {
	got, err := parseNodeGroups([]string{"1:5:ng-a", "0:3:ng:with:colons"})
	if err != nil {
		t.Fatal(err)
	}
	want := []explicitGroup{{Name: "ng-a", Min: 1, Max: 5}, {Name: "ng:with:colons", Min: 0, Max: 3}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	for _, bad := range [][]string{{"5:1:x"}, {"1:x"}, {"1:2:a", "0:3:a"}} {
		if _, err := parseNodeGroups(bad); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

func TestPlaceholderIDs(t *testing.T) {
	a, b := placeholderID("a b", 0), placeholderID("a-b", 0)
	if a == b {
		t.Errorf("placeholders of different groups collide: %q", a)
	}
	if !isPlaceholder(a) || isPlaceholder("i-0123456789abcdef0") {
		t.Error("isPlaceholder misjudges")
	}
	if strings.ContainsAny(placeholderID("x/y:z", 3), "/: ") {
		t.Errorf("unsafe characters in %q", placeholderID("x/y:z", 3))
	}
}
