package aws

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"k8s.io/autoscaler/cluster-autoscaler/test/awsfake"
)

// wantDevices is what a template's slice should hold.
type wantDevices struct {
	driver  string
	count   int
	product string // productName (NVIDIA) or instanceType (Neuron)
	arch    string
	memory  string // per-GPU memory capacity; "" for none
}

// TestDRATemplateSlicesPerInstanceType: a group at zero whose dra-driver
// tag names NVIDIA's or AWS Neuron's driver gets, through the SDK against
// the fake's DescribeInstanceTypes, one device per accelerator of its
// instance type with the driver's selection attributes, and no extended
// GPU resource; a type without such devices, an unknown driver or no tag
// give no slice (and, without a known driver, the nvidia.com/gpu capacity
// as before).
func TestDRATemplateSlicesPerInstanceType(t *testing.T) {
	cases := []struct {
		typ, driver string
		want        *wantDevices
		gpuResource int64 // nvidia.com/gpu capacity of the template
	}{
		{typ: "p4d.24xlarge", driver: NVIDIADRADriver, want: &wantDevices{NVIDIADRADriver, 8, "NVIDIA A100-SXM4-40GB", "Ampere", "40Gi"}},
		{typ: "p4de.24xlarge", driver: NVIDIADRADriver, want: &wantDevices{NVIDIADRADriver, 8, "NVIDIA A100-SXM4-80GB", "Ampere", "80Gi"}},
		{typ: "p5.48xlarge", driver: NVIDIADRADriver, want: &wantDevices{NVIDIADRADriver, 8, "NVIDIA H100 80GB HBM3", "Hopper", "80Gi"}},
		{typ: "g5.xlarge", driver: NVIDIADRADriver, want: &wantDevices{NVIDIADRADriver, 1, "NVIDIA A10G", "Ampere", "24Gi"}},
		{typ: "g6.12xlarge", driver: NVIDIADRADriver, want: &wantDevices{NVIDIADRADriver, 4, "NVIDIA L4", "Ada Lovelace", "24Gi"}},
		{typ: "g4dn.xlarge", driver: NVIDIADRADriver, want: &wantDevices{NVIDIADRADriver, 1, "Tesla T4", "Turing", "16Gi"}},
		{typ: "inf2.xlarge", driver: NeuronDRADriver, want: &wantDevices{NeuronDRADriver, 1, "inf2.xlarge", "", ""}},
		{typ: "inf2.48xlarge", driver: NeuronDRADriver, want: &wantDevices{NeuronDRADriver, 12, "inf2.48xlarge", "", ""}},
		{typ: "trn1.32xlarge", driver: NeuronDRADriver, want: &wantDevices{NeuronDRADriver, 16, "trn1.32xlarge", "", ""}},
		{typ: "m5.xlarge", driver: NVIDIADRADriver},                    // no GPU
		{typ: "m5.xlarge", driver: NeuronDRADriver},                    // no Neuron device
		{typ: "trn1.2xlarge", driver: NVIDIADRADriver},                 // Neuron, not NVIDIA
		{typ: "p4d.24xlarge", driver: NeuronDRADriver, gpuResource: 8}, // NVIDIA, not Neuron: the GPUs stay a resource
		{typ: "p4d.24xlarge", driver: "tpu.example.com", gpuResource: 8},
		{typ: "p4d.24xlarge", driver: "Not A Driver", gpuResource: 8},
		{typ: "p4d.24xlarge", driver: "", gpuResource: 8}, // no tag: the extended resource path as before
	}
	s := startFake(t)
	for _, it := range awsfake.AcceleratedInstanceTypes() {
		s.AddInstanceType(it)
	}
	var nodes []string
	for i, tc := range cases {
		name := "g" + string(rune('a'+i))
		s.AddLaunchTemplate(awsfake.LaunchTemplate{Name: "lt-" + name, DefaultVersion: 1,
			Versions: []awsfake.LaunchTemplateVersion{{Number: 1, InstanceType: tc.typ}}})
		g := awsfake.Group{Name: name, Max: 10, LaunchTemplate: &awsfake.LaunchTemplateSpec{Name: "lt-" + name, Version: "$Default"},
			Subnets: []string{"subnet-a"}, Tags: map[string]string{}}
		if tc.driver != "" {
			g.Tags[DRADriverTag] = tc.driver
		}
		s.AddGroup(g)
		nodes = append(nodes, "0:10:"+name)
	}
	p := newTestProvider(t, nodes, nil)
	ctx := context.Background()
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	for i, tc := range cases {
		name := "g" + string(rune('a'+i))
		t.Run(tc.typ+"/"+tc.driver, func(t *testing.T) {
			info, err := group(t, p, name).TemplateNodeInfo(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := info.Node.Labels[apiv1.LabelInstanceTypeStable]; got != tc.typ {
				t.Fatalf("template of instance type %q, want %q", got, tc.typ)
			}
			gpus := info.Node.Status.Capacity[gpuResource]
			if gpus.Value() != tc.gpuResource {
				t.Errorf("nvidia.com/gpu capacity %s, want %d", gpus.String(), tc.gpuResource)
			}
			if tc.want == nil {
				if len(info.ResourceSlices) != 0 {
					t.Errorf("%d slices, want none", len(info.ResourceSlices))
				}
				return
			}
			checkSlice(t, info.Node.Name, info.ResourceSlices, *tc.want)
			// A second call gives equal, independent copies.
			again, _ := group(t, p, name).TemplateNodeInfo(ctx)
			again.ResourceSlices[0].Spec.Devices = nil
			if info2, _ := group(t, p, name).TemplateNodeInfo(ctx); len(info2.ResourceSlices[0].Spec.Devices) != tc.want.count {
				t.Error("the kept template's slices were changed through a returned copy")
			}
		})
	}
}

func checkSlice(t *testing.T, nodeName string, slices []*resourceapi.ResourceSlice, want wantDevices) {
	t.Helper()
	if len(slices) != 1 {
		t.Fatalf("%d slices, want 1", len(slices))
	}
	sl := slices[0]
	if sl.Spec.Driver != want.driver || sl.Spec.NodeName == nil || *sl.Spec.NodeName != nodeName || sl.Spec.Pool.Name != nodeName ||
		sl.Spec.Pool.ResourceSliceCount != 1 {
		t.Errorf("slice driver %q node %v pool %+v; want %s on %s, one slice in a pool named after the node", sl.Spec.Driver,
			sl.Spec.NodeName, sl.Spec.Pool, want.driver, nodeName)
	}
	if len(sl.Spec.Devices) != want.count {
		t.Fatalf("%d devices, want %d", len(sl.Spec.Devices), want.count)
	}
	seen := map[string]bool{}
	for i, d := range sl.Spec.Devices {
		if seen[d.Name] {
			t.Errorf("device name %s twice", d.Name)
		}
		seen[d.Name] = true
		str := func(k resourceapi.QualifiedName) string {
			if a, ok := d.Attributes[k]; ok && a.StringValue != nil {
				return *a.StringValue
			}
			return ""
		}
		switch want.driver {
		case NVIDIADRADriver:
			if str("type") != "gpu" || str("productName") != want.product || str("architecture") != want.arch {
				t.Errorf("device %s: type %q productName %q architecture %q; want gpu, %q, %q", d.Name, str("type"),
					str("productName"), str("architecture"), want.product, want.arch)
			}
			if c := d.Attributes["cudaComputeCapability"]; c.VersionValue == nil {
				t.Errorf("device %s has no cudaComputeCapability", d.Name)
			}
			mem := d.Capacity["memory"]
			if wantMem := resource.MustParse(want.memory); mem.Value.Cmp(wantMem) != 0 {
				t.Errorf("device %s: memory %s, want %s", d.Name, mem.Value.String(), want.memory)
			}
		case NeuronDRADriver:
			id := d.Attributes["deviceId"].IntValue
			if str("instanceType") != want.product || str("resourceType") != "neuron_device" || id == nil || *id != int64(i) {
				t.Errorf("device %s: instanceType %q resourceType %q deviceId %v; want %q, neuron_device, %d", d.Name,
					str("instanceType"), str("resourceType"), id, want.product, i)
			}
		}
	}
}

// TestDRATemplateSlicesSayWhyNot: the reason a tag gives no slices names
// what is wrong.
func TestDRATemplateSlicesSayWhyNot(t *testing.T) {
	cpu := instanceType{Name: "m5.xlarge", VCPU: 4, MemoryMiB: 16384}
	amd := instanceType{Name: "g4ad.xlarge", VCPU: 4, MemoryMiB: 16384, GPUs: 1, GPUManufacturer: "AMD", GPUName: "Radeon Pro V520"}
	for _, tc := range []struct {
		driver string
		t      instanceType
		want   string
	}{
		{NVIDIADRADriver, cpu, "m5.xlarge has no NVIDIA GPU"},
		{NVIDIADRADriver, amd, "g4ad.xlarge has no NVIDIA GPU"},
		{NeuronDRADriver, cpu, "m5.xlarge has no Neuron device"},
		{"tpu.example.com", cpu, `"tpu.example.com" is not one whose devices this provider knows`},
		{"bad_name", cpu, "is not a DRA driver name"},
	} {
		slices, why := draTemplateSlices("n", tc.driver, tc.t)
		if len(slices) != 0 || !strings.Contains(why, tc.want) {
			t.Errorf("%s on %s: %d slices, reason %q; want none and %q", tc.driver, tc.t.Name, len(slices), why, tc.want)
		}
	}
	// A GPU model the provider has no entry for keeps its EC2 name.
	odd := instanceType{Name: "x", GPUs: 2, GPUManufacturer: "NVIDIA", GPUName: "Z9"}
	slices, why := draTemplateSlices("n", NVIDIADRADriver, odd)
	if why != "" || len(slices) != 1 || *slices[0].Spec.Devices[1].Attributes["productName"].StringValue != "NVIDIA Z9" {
		t.Errorf("unknown model: %v, %q", slices, why)
	}
}

// TestDescribeNeuronInfo: DescribeInstanceTypes' NeuronInfo is read.
func TestDescribeNeuronInfo(t *testing.T) {
	info := ec2types.InstanceTypeInfo{InstanceType: "trn1.32xlarge", VCpuInfo: &ec2types.VCpuInfo{DefaultVCpus: aws.Int32(128)},
		MemoryInfo: &ec2types.MemoryInfo{SizeInMiB: aws.Int64(524288)},
		NeuronInfo: &ec2types.NeuronInfo{NeuronDevices: []ec2types.NeuronDeviceInfo{{Count: aws.Int32(16), Name: aws.String("Trainium"),
			CoreInfo: &ec2types.NeuronDeviceCoreInfo{Count: aws.Int32(2)}, MemoryInfo: &ec2types.NeuronDeviceMemoryInfo{SizeInMiB: aws.Int32(32768)}}}}}
	got, err := describeInstanceType(info)
	if err != nil {
		t.Fatal(err)
	}
	if got.NeuronDevices != 16 || got.NeuronName != "Trainium" || got.NeuronCores != 2 || got.NeuronMemoryMiB != 32768 {
		t.Errorf("neuron facts %+v", got)
	}
	info.NeuronInfo.NeuronDevices[0].Count = aws.Int32(-1)
	if _, err := describeInstanceType(info); err == nil {
		t.Error("a negative Neuron device count was accepted")
	}
}

// TestDRATemplateOfMixedTypes: a mixed-instances group's template type
// (minimumType) promises no more devices, memory or model than every type
// it may launch has.
func TestDRATemplateOfMixedTypes(t *testing.T) {
	facts := map[string]instanceType{}
	for _, it := range awsfake.AcceleratedInstanceTypes() {
		facts[it.Name] = instanceType{Name: it.Name, VCPU: int64(it.VCPU), MemoryMiB: it.MemoryMiB, GPUs: int64(it.GPUs),
			GPUManufacturer: it.GPUManufacturer, GPUName: it.GPUName, GPUMemoryMiB: it.GPUMemoryMiB,
			NeuronDevices: int64(it.NeuronDevices), NeuronName: it.NeuronName, NeuronCores: int64(it.NeuronCores),
			NeuronMemoryMiB: it.NeuronMemoryMiB}
	}
	count := func(driver string, names ...string) (int, map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, string) {
		var types []instanceType
		for _, n := range names {
			types = append(types, facts[n])
		}
		slices, _ := draTemplateSlices("n", driver, minimumType(types))
		if len(slices) == 0 {
			return 0, nil, ""
		}
		d := slices[0].Spec.Devices[0]
		mem := d.Capacity["memory"]
		return len(slices[0].Spec.Devices), d.Attributes, mem.Value.String()
	}
	if n, attrs, mem := count(NVIDIADRADriver, "p4d.24xlarge", "p4de.24xlarge"); n != 8 || mem != "40Gi" || attrs["productName"].StringValue != nil {
		t.Errorf("p4d+p4de: %d devices, memory %s, attributes %v; want 8 of 40Gi without productName", n, mem, attrs)
	}
	if n, attrs, _ := count(NVIDIADRADriver, "g5.12xlarge", "g6.12xlarge"); n != 4 || attrs["productName"].StringValue != nil {
		t.Errorf("g5+g6: %d devices, attributes %v; want 4 without productName", n, attrs)
	}
	if n, attrs, _ := count(NVIDIADRADriver, "g6.xlarge", "g6.12xlarge"); n != 1 || *attrs["productName"].StringValue != "NVIDIA L4" {
		t.Errorf("g6 sizes: %d devices, attributes %v; want 1 NVIDIA L4", n, attrs)
	}
	if n, _, _ := count(NeuronDRADriver, "inf2.xlarge", "inf2.48xlarge"); n != 1 {
		t.Errorf("inf2 sizes: %d Neuron devices, want 1", n)
	}
	if n, _, _ := count(NeuronDRADriver, "trn1.32xlarge", "p4d.24xlarge"); n != 0 {
		t.Errorf("trn1+p4d: %d Neuron devices, want 0", n)
	}
}
