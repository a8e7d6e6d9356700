package awsfake

import (
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"
)

func TestDescribeInstanceTypes(t *testing.T) {
	s := startFake(t)
	for i := range 120 {
		s.AddInstanceType(InstanceType{Name: fmt.Sprintf("x%03d.large", i), VCPU: 2, MemoryMiB: 8192, MaxENIs: 3, IPv4PerENI: 10})
	}
	s.AddInstanceType(InstanceType{Name: "p3.2xlarge", VCPU: 8, MemoryMiB: 62464, Arch: "x86_64", GPUs: 1,
		GPUManufacturer: "NVIDIA", GPUName: "V100", GPUMemoryMiB: 16384, MaxENIs: 4, IPv4PerENI: 15})
	s.AddInstanceType(InstanceType{Name: "m7g.large", VCPU: 2, MemoryMiB: 8192, Arch: "arm64", MaxENIs: 3, IPv4PerENI: 10})
	c := sdkClients(t, s)

	p := ec2.NewDescribeInstanceTypesPaginator(c.ec2, &ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(50)})
	seen := map[string]bool{}
	pages := 0
	for p.HasMorePages() {
		out, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		pages++
		for _, it := range out.InstanceTypes {
			seen[string(it.InstanceType)] = true
		}
	}
	if len(seen) != 122 || pages != 3 {
		t.Errorf("%d instance types in %d pages, want 122 in 3", len(seen), pages)
	}

	out, err := c.ec2.DescribeInstanceTypes(t.Context(), &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{"p3.2xlarge", "m7g.large"}})
	if err != nil {
		t.Fatal(err)
	}
	type facts struct {
		Name, Arch, GPUMaker, GPUName string
		VCPU, ENIs, IPs, GPUs         int32
		Mem, GPUMem                   int64
	}
	var got []facts
	for _, it := range out.InstanceTypes {
		f := facts{Name: string(it.InstanceType), Arch: string(it.ProcessorInfo.SupportedArchitectures[0]),
			VCPU: aws.ToInt32(it.VCpuInfo.DefaultVCpus), Mem: aws.ToInt64(it.MemoryInfo.SizeInMiB),
			ENIs: aws.ToInt32(it.NetworkInfo.MaximumNetworkInterfaces), IPs: aws.ToInt32(it.NetworkInfo.Ipv4AddressesPerInterface)}
		if it.GpuInfo != nil && len(it.GpuInfo.Gpus) > 0 {
			g := it.GpuInfo.Gpus[0]
			f.GPUs, f.GPUMaker, f.GPUName, f.GPUMem = aws.ToInt32(g.Count), aws.ToString(g.Manufacturer), aws.ToString(g.Name), int64(aws.ToInt32(g.MemoryInfo.SizeInMiB))
		}
		got = append(got, f)
	}
	want := []facts{
		{Name: "m7g.large", Arch: "arm64", VCPU: 2, Mem: 8192, ENIs: 3, IPs: 10},
		{Name: "p3.2xlarge", Arch: "x86_64", VCPU: 8, Mem: 62464, ENIs: 4, IPs: 15, GPUs: 1, GPUMaker: "NVIDIA", GPUName: "V100", GPUMem: 16384},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("instance types (-want +got):\n%s", diff)
	}
	if _, err := c.ec2.DescribeInstanceTypes(t.Context(), &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{"no.such"}}); apiErrorCode(err) != "InvalidInstanceType" {
		t.Errorf("unknown type: %v, want InvalidInstanceType", err)
	}
}

// addWorkersTemplate adds subnets and a launch template of three versions,
// the second the default.
func addWorkersTemplate(s *Server) (id string) {
	s.AddSubnet("subnet-1", "us-east-1a")
	s.AddSubnet("subnet-2", "us-east-1b")
	return s.AddLaunchTemplate(LaunchTemplate{Name: "workers", DefaultVersion: 2, Versions: []LaunchTemplateVersion{
		{Number: 1, InstanceType: "m5.large"}, {Number: 2, InstanceType: "m5.xlarge"}, {Number: 3, InstanceType: "m5.2xlarge"},
	}})
}

func TestDescribeLaunchTemplateVersions(t *testing.T) {
	s := startFake(t)
	id := addWorkersTemplate(s)
	c := sdkClients(t, s)
	tests := []struct {
		name     string
		input    *ec2.DescribeLaunchTemplateVersionsInput
		want     []string
		wantCode string
	}{
		{name: "default by id", input: &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: aws.String(id), Versions: []string{"$Default"}}, want: []string{"2:m5.xlarge:true"}},
		{name: "latest by name", input: &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateName: aws.String("workers"), Versions: []string{"$Latest"}}, want: []string{"3:m5.2xlarge:false"}},
		{name: "number", input: &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: aws.String(id), Versions: []string{"1"}}, want: []string{"1:m5.large:false"}},
		{name: "all", input: &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: aws.String(id)}, want: []string{"1:m5.large:false", "2:m5.xlarge:true", "3:m5.2xlarge:false"}},
		{name: "unknown id", input: &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: aws.String("lt-0000")}, wantCode: "InvalidLaunchTemplateId.NotFound"},
		{name: "unknown name", input: &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateName: aws.String("nope")}, wantCode: "InvalidLaunchTemplateName.NotFoundException"},
		{name: "unknown version", input: &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: aws.String(id), Versions: []string{"9"}}, wantCode: "InvalidLaunchTemplateId.VersionNotFound"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := c.ec2.DescribeLaunchTemplateVersions(t.Context(), tc.input)
			if tc.wantCode != "" {
				if apiErrorCode(err) != tc.wantCode {
					t.Fatalf("got %v, want %s", err, tc.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, v := range out.LaunchTemplateVersions {
				if aws.ToString(v.LaunchTemplateId) != id || aws.ToString(v.LaunchTemplateName) != "workers" {
					t.Errorf("version of %s/%s", aws.ToString(v.LaunchTemplateId), aws.ToString(v.LaunchTemplateName))
				}
				got = append(got, fmt.Sprintf("%d:%s:%t", aws.ToInt64(v.VersionNumber), v.LaunchTemplateData.InstanceType, aws.ToBool(v.DefaultVersion)))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("versions (-want +got):\n%s", diff)
			}
		})
	}

}

func TestDescribeSubnets(t *testing.T) {
	s := startFake(t)
	addWorkersTemplate(s)
	c := sdkClients(t, s)
	subnets, err := c.ec2.DescribeSubnets(t.Context(), &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-2", "subnet-1"}})
	if err != nil {
		t.Fatal(err)
	}
	var zones []string
	for _, sn := range subnets.Subnets {
		zones = append(zones, aws.ToString(sn.SubnetId)+"="+aws.ToString(sn.AvailabilityZone))
	}
	if diff := cmp.Diff([]string{"subnet-2=us-east-1b", "subnet-1=us-east-1a"}, zones); diff != "" {
		t.Errorf("subnets (-want +got):\n%s", diff)
	}
	if _, err := c.ec2.DescribeSubnets(t.Context(), &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-9"}}); apiErrorCode(err) != "InvalidSubnetID.NotFound" {
		t.Errorf("unknown subnet: %v, want InvalidSubnetID.NotFound", err)
	}
}

func TestMixedInstancesGroup(t *testing.T) {
	s := startFake(t)
	id := addWorkersTemplate(s)
	c := sdkClients(t, s)
	s.AddGroup(Group{Name: "mixed", Max: 3, Desired: 1, Subnets: []string{"subnet-1", "subnet-2"}, MixedInstances: &MixedInstancesPolicy{
		LaunchTemplate: LaunchTemplateSpec{Name: "workers", Version: "$Latest"}, Overrides: []string{"c5.large", "c5a.large"},
	}})
	groups, err := c.asg.DescribeAutoScalingGroups(t.Context(), &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{"mixed"}})
	if err != nil {
		t.Fatal(err)
	}
	g := groups.AutoScalingGroups[0]
	mip := g.MixedInstancesPolicy
	if mip == nil || mip.LaunchTemplate == nil || mip.LaunchTemplate.LaunchTemplateSpecification == nil {
		t.Fatalf("mixed instances policy missing: %+v", g)
	}
	spec := mip.LaunchTemplate.LaunchTemplateSpecification
	var overrides []string
	for _, o := range mip.LaunchTemplate.Overrides {
		overrides = append(overrides, aws.ToString(o.InstanceType))
	}
	gotMIP := []string{aws.ToString(spec.LaunchTemplateId), aws.ToString(spec.LaunchTemplateName), aws.ToString(spec.Version), fmt.Sprint(overrides),
		aws.ToString(g.VPCZoneIdentifier), fmt.Sprint(g.AvailabilityZones), aws.ToString(g.Instances[0].InstanceType)}
	wantMIP := []string{id, "workers", "$Latest", "[c5.large c5a.large]", "subnet-1,subnet-2", "[us-east-1a us-east-1b]", "c5.large"}
	if diff := cmp.Diff(wantMIP, gotMIP); diff != "" {
		t.Errorf("mixed instances group (-want +got):\n%s", diff)
	}
}
