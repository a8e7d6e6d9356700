package awsfake

import (
	"slices"
	"sort"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"
)

func catalogue(s *Server) {
	for _, t := range []InstanceType{
		{Name: "c5.large", VCPU: 2, MemoryMiB: 4096, Arch: "x86_64"},
		{Name: "m5.large", VCPU: 2, MemoryMiB: 8192, Arch: "x86_64"},
		{Name: "r5.large", VCPU: 2, MemoryMiB: 16384, Arch: "x86_64"},
		{Name: "m5.xlarge", VCPU: 4, MemoryMiB: 16384, Arch: "x86_64"},
		{Name: "t3.small", VCPU: 2, MemoryMiB: 2048, Arch: "x86_64", Burstable: true},
		{Name: "c6g.large", VCPU: 2, MemoryMiB: 4096, Arch: "arm64"},
		{Name: "g4dn.xlarge", VCPU: 4, MemoryMiB: 16384, Arch: "x86_64", GPUs: 1, GPUManufacturer: "NVIDIA", GPUName: "T4", GPUMemoryMiB: 16384},
		{Name: "g4ad.xlarge", VCPU: 4, MemoryMiB: 16384, Arch: "x86_64", GPUs: 1, GPUManufacturer: "AMD", GPUName: "Radeon Pro V520", GPUMemoryMiB: 8192},
	} {
		s.AddInstanceType(t)
	}
}

// TestGetInstanceTypesFromInstanceRequirements: the fields the fake
// honours, through the SDK's serialisation.
func TestGetInstanceTypesFromInstanceRequirements(t *testing.T) {
	s := startFake(t)
	catalogue(s)
	c := sdkClients(t, s, noRetries)
	base := func(vMin, vMax, memMin int32) *ec2types.InstanceRequirementsRequest {
		r := &ec2types.InstanceRequirementsRequest{VCpuCount: &ec2types.VCpuCountRangeRequest{Min: aws.Int32(vMin)},
			MemoryMiB: &ec2types.MemoryMiBRequest{Min: aws.Int32(memMin)}}
		if vMax > 0 {
			r.VCpuCount.Max = aws.Int32(vMax)
		}
		return r
	}
	with := func(r *ec2types.InstanceRequirementsRequest, f func(*ec2types.InstanceRequirementsRequest)) *ec2types.InstanceRequirementsRequest {
		f(r)
		return r
	}
	x86 := []ec2types.ArchitectureType{ec2types.ArchitectureTypeX8664}
	cases := []struct {
		name  string
		archs []ec2types.ArchitectureType
		req   *ec2types.InstanceRequirementsRequest
		want  []string
	}{
		{"vCPU and memory ranges; burstable and arm64 out", x86, base(2, 2, 4096), []string{"c5.large", "m5.large", "r5.large"}},
		{"both architectures", []ec2types.ArchitectureType{"x86_64", "arm64"}, base(2, 2, 4096), []string{"c5.large", "c6g.large", "m5.large", "r5.large"}},
		{"memory max", x86, with(base(1, 0, 1024), func(r *ec2types.InstanceRequirementsRequest) { r.MemoryMiB.Max = aws.Int32(4096) }), []string{"c5.large"}},
		{"burstable included", x86, with(base(2, 2, 1024), func(r *ec2types.InstanceRequirementsRequest) { r.BurstablePerformance = "included" }),
			[]string{"c5.large", "m5.large", "r5.large", "t3.small"}},
		{"burstable required", x86, with(base(1, 0, 1024), func(r *ec2types.InstanceRequirementsRequest) { r.BurstablePerformance = "required" }),
			[]string{"t3.small"}},
		{"NVIDIA GPUs", x86, with(base(1, 0, 1024), func(r *ec2types.InstanceRequirementsRequest) {
			r.AcceleratorCount = &ec2types.AcceleratorCountRequest{Min: aws.Int32(1)}
			r.AcceleratorTypes = []ec2types.AcceleratorType{"gpu"}
			r.AcceleratorManufacturers = []ec2types.AcceleratorManufacturer{"nvidia"}
		}), []string{"g4dn.xlarge"}},
		{"accelerators excluded", x86, with(base(4, 4, 1024), func(r *ec2types.InstanceRequirementsRequest) {
			r.AcceleratorCount = &ec2types.AcceleratorCountRequest{Max: aws.Int32(0)}
		}), []string{"m5.xlarge"}},
		{"accelerator name and total memory", x86, with(base(1, 0, 1024), func(r *ec2types.InstanceRequirementsRequest) {
			r.AcceleratorNames = []ec2types.AcceleratorName{"t4"}
			r.AcceleratorTotalMemoryMiB = &ec2types.AcceleratorTotalMemoryMiBRequest{Min: aws.Int32(16000)}
		}), []string{"g4dn.xlarge"}},
		{"allowed with wildcard", x86, with(base(1, 0, 1024), func(r *ec2types.InstanceRequirementsRequest) { r.AllowedInstanceTypes = []string{"m5.*"} }),
			[]string{"m5.large", "m5.xlarge"}},
		{"excluded with wildcard", x86, with(base(2, 2, 1024), func(r *ec2types.InstanceRequirementsRequest) { r.ExcludedInstanceTypes = []string{"*5.large"} }),
			nil},
		{"memory per vCPU", x86, with(base(1, 0, 1024), func(r *ec2types.InstanceRequirementsRequest) {
			r.MemoryGiBPerVCpu = &ec2types.MemoryGiBPerVCpuRequest{Min: aws.Float64(8)}
		}), []string{"r5.large"}},
		{"bare metal required", x86, with(base(1, 0, 1024), func(r *ec2types.InstanceRequirementsRequest) { r.BareMetal = "required" }), nil},
		{"price protection ignored", x86, with(base(2, 2, 8192), func(r *ec2types.InstanceRequirementsRequest) {
			r.OnDemandMaxPricePercentageOverLowestPrice = aws.Int32(20)
		}), []string{"m5.large", "r5.large"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pages := ec2.NewGetInstanceTypesFromInstanceRequirementsPaginator(c.ec2, &ec2.GetInstanceTypesFromInstanceRequirementsInput{
				ArchitectureTypes: tc.archs, VirtualizationTypes: []ec2types.VirtualizationType{"hvm"}, InstanceRequirements: tc.req,
				MaxResults: aws.Int32(2)})
			var got []string
			for pages.HasMorePages() {
				out, err := pages.NextPage(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				for _, it := range out.InstanceTypes {
					got = append(got, aws.ToString(it.InstanceType))
				}
			}
			sort.Strings(got)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("types (-want +got):\n%s", d)
			}
		})
	}

	// (The SDK itself refuses a request without ArchitectureTypes or the
	// required minimums, so those never reach the fake.)
	refused := []struct {
		name, code string
		in         *ec2.GetInstanceTypesFromInstanceRequirementsInput
	}{
		{"allowed and excluded", "InvalidParameterCombination", &ec2.GetInstanceTypesFromInstanceRequirementsInput{ArchitectureTypes: x86,
			VirtualizationTypes: []ec2types.VirtualizationType{"hvm"}, InstanceRequirements: with(base(1, 0, 1), func(r *ec2types.InstanceRequirementsRequest) {
				r.AllowedInstanceTypes, r.ExcludedInstanceTypes = []string{"m5.*"}, []string{"m5.large"}
			})}},
		{"a field the fake does not implement", "InvalidParameterValue", &ec2.GetInstanceTypesFromInstanceRequirementsInput{ArchitectureTypes: x86,
			VirtualizationTypes: []ec2types.VirtualizationType{"hvm"}, InstanceRequirements: with(base(1, 0, 1), func(r *ec2types.InstanceRequirementsRequest) {
				r.NetworkInterfaceCount = &ec2types.NetworkInterfaceCountRequest{Min: aws.Int32(2)}
			})}},
	}
	for _, tc := range refused {
		_, err := c.ec2.GetInstanceTypesFromInstanceRequirements(t.Context(), tc.in)
		if got := apiErrorCode(err); got != tc.code {
			t.Errorf("%s: error %v, want code %s", tc.name, err, tc.code)
		}
	}
	s.Deny("GetInstanceTypesFromInstanceRequirements", "DescribeImages")
	_, err := c.ec2.GetInstanceTypesFromInstanceRequirements(t.Context(), &ec2.GetInstanceTypesFromInstanceRequirementsInput{ArchitectureTypes: x86,
		VirtualizationTypes: []ec2types.VirtualizationType{"hvm"}, InstanceRequirements: base(1, 0, 1)})
	if got := apiErrorCode(err); got != "UnauthorizedOperation" {
		t.Errorf("denied: error %v, want UnauthorizedOperation", err)
	}
	_, err = c.ec2.DescribeImages(t.Context(), &ec2.DescribeImagesInput{ImageIds: []string{"ami-1"}})
	if got := apiErrorCode(err); got != "UnauthorizedOperation" {
		t.Errorf("DescribeImages denied: error %v, want UnauthorizedOperation", err)
	}
}

// TestRequirementsGroup: a group whose mixed-instances policy carries
// InstanceRequirements describes them as Auto Scaling does (SDK types),
// launches the smallest matching type of its image's architecture, and
// DescribeImages names that architecture.
func TestRequirementsGroup(t *testing.T) {
	s := startFake(t)
	catalogue(s)
	s.AddImage("ami-arm", "arm64")
	s.AddLaunchTemplate(LaunchTemplate{ID: "lt-arm", Name: "arm", DefaultVersion: 1, Versions: []LaunchTemplateVersion{{Number: 1, ImageID: "ami-arm"}}})
	s.AddLaunchTemplate(LaunchTemplate{ID: "lt-x86", Name: "x86", DefaultVersion: 1, Versions: []LaunchTemplateVersion{{Number: 1}}})
	req := InstanceRequirements{VCpuCount: IntRange{Min: aws.Int(2), Max: aws.Int(4)}, MemoryMiB: IntRange{Min: aws.Int(2048)},
		AcceleratorCount: IntRange{Max: aws.Int(0)}, ExcludedInstanceTypes: []string{"c5.*"}, BurstablePerformance: "excluded",
		MemoryGiBPerVCpu: FloatRange{Min: aws.Float64(1.5)}}
	s.AddGroup(Group{Name: "arm", Max: 2, Desired: 1, MixedInstances: &MixedInstancesPolicy{
		LaunchTemplate: LaunchTemplateSpec{ID: "lt-arm", Version: "$Default"}, Requirements: &req}})
	s.AddGroup(Group{Name: "x86", Max: 2, Desired: 1, MixedInstances: &MixedInstancesPolicy{
		LaunchTemplate: LaunchTemplateSpec{ID: "lt-x86", Version: "$Default"}, Requirements: &req}})
	c := sdkClients(t, s, noRetries)

	out, err := c.asg.DescribeAutoScalingGroups(t.Context(), &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{"arm"}})
	if err != nil || len(out.AutoScalingGroups) != 1 {
		t.Fatalf("describe: %v, %d groups", err, len(out.AutoScalingGroups))
	}
	ov := out.AutoScalingGroups[0].MixedInstancesPolicy.LaunchTemplate.Overrides
	if len(ov) != 1 || ov[0].InstanceRequirements == nil || ov[0].InstanceType != nil {
		t.Fatalf("overrides %+v, want one with InstanceRequirements only", ov)
	}
	r := ov[0].InstanceRequirements
	type got struct {
		VMin, VMax, MemMin, AccMax int32
		MemMax                     *int32
		Excluded                   []string
		Burst                      string
		PerVCPU                    float64
	}
	g := got{VMin: aws.ToInt32(r.VCpuCount.Min), VMax: aws.ToInt32(r.VCpuCount.Max), MemMin: aws.ToInt32(r.MemoryMiB.Min), MemMax: r.MemoryMiB.Max,
		AccMax: aws.ToInt32(r.AcceleratorCount.Max), Excluded: r.ExcludedInstanceTypes, Burst: string(r.BurstablePerformance),
		PerVCPU: aws.ToFloat64(r.MemoryGiBPerVCpu.Min)}
	if d := cmp.Diff(got{VMin: 2, VMax: 4, MemMin: 2048, Excluded: []string{"c5.*"}, Burst: "excluded", PerVCPU: 1.5}, g); d != "" || r.AcceleratorCount.Max == nil {
		t.Errorf("InstanceRequirements as described (-want +got):\n%s (accelerator max set: %v)", d, r.AcceleratorCount.Max != nil)
	}

	launched := map[string]string{}
	for _, grp := range []string{"arm", "x86"} {
		for _, in := range s.Instances(grp) {
			launched[grp] = in.InstanceType
		}
	}
	if d := cmp.Diff(map[string]string{"arm": "c6g.large", "x86": "m5.large"}, launched); d != "" {
		t.Errorf("launched types (-want +got):\n%s", d)
	}

	img, err := c.ec2.DescribeImages(t.Context(), &ec2.DescribeImagesInput{ImageIds: []string{"ami-arm"}})
	if err != nil || len(img.Images) != 1 || img.Images[0].Architecture != ec2types.ArchitectureValuesArm64 {
		t.Fatalf("DescribeImages: %v, %+v", err, img)
	}
	_, err = c.ec2.DescribeImages(t.Context(), &ec2.DescribeImagesInput{ImageIds: []string{"ami-none"}})
	if code := apiErrorCode(err); code != "InvalidAMIID.NotFound" {
		t.Errorf("unknown image: %v, want InvalidAMIID.NotFound", err)
	}
	lt, err := c.ec2.DescribeLaunchTemplateVersions(t.Context(), &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: aws.String("lt-arm")})
	if err != nil || len(lt.LaunchTemplateVersions) != 1 || aws.ToString(lt.LaunchTemplateVersions[0].LaunchTemplateData.ImageId) != "ami-arm" {
		t.Errorf("the launch template's image: %v, %+v", err, lt)
	}
	if !slices.Contains(s.AllowOnly("ec2:DescribeInstanceTypes"), "GetInstanceTypesFromInstanceRequirements") {
		t.Error("AllowOnly does not know GetInstanceTypesFromInstanceRequirements")
	}
}
