package aws

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// maxGroupSize bounds the sizes an Auto Scaling group may report; a larger
// one is taken for a broken answer.
const maxGroupSize = 100_000

// ErrBadDescription marks a describe answer that makes no sense; the group
// or instance type it concerns is left out, with an error log.
var ErrBadDescription = errors.New("invalid description from AWS")

func badDescription(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadDescription, fmt.Sprintf(format, args...))
}

// groupDesc is what one DescribeAutoScalingGroups answer says of a group.
type groupDesc struct {
	Name                string
	Min, Max, Desired   int
	Instances           []instanceDesc
	Tags                map[string]string
	LaunchTemplate      *launchTemplateRef
	LaunchConfiguration string
	// MixedOverrides are the instance types of the mixed-instances
	// policy's overrides, in order; the policy's launch template is in
	// LaunchTemplate.
	MixedOverrides []string
	// MixedRequirements are the overrides that select instance types by
	// their attributes (requirements.go).
	MixedRequirements []requirementsOverride
	// OverrideTemplates are the launch templates overrides name for
	// themselves (instances of those overrides are launched with them).
	OverrideTemplates []launchTemplateRef
	Mixed             bool
	// Distribution is the mixed-instances policy's On-Demand/Spot split
	// (capacitytype.go).
	Distribution instancesDistribution
	Subnets      []string
	Zones        []string
}

// instanceDesc is one instance of a group.
type instanceDesc struct {
	ID, Zone, Lifecycle, Type string
	// Protected is the instance's scale-in protection: the group does not
	// pick it when its desired capacity goes below its instances.
	Protected bool
	// LaunchTemplate (its version a number) or LaunchConfiguration is what
	// the instance was launched with, as AWS reports it (drift.go).
	LaunchTemplate      *launchTemplateRef
	LaunchConfiguration string
}

// launchTemplateRef names a launch template version: by ID or Name, and
// "$Default", "$Latest" or a number ("" reads as "$Default").
type launchTemplateRef struct {
	ID, Name, Version string
}

func (r launchTemplateRef) String() string {
	n := r.ID
	if n == "" {
		n = r.Name
	}
	return n + "@" + r.version()
}

func (r launchTemplateRef) version() string {
	if r.Version == "" {
		return "$Default"
	}
	return r.Version
}

// terminating reports whether the instance is on its way out.
func (i instanceDesc) terminating() bool {
	return strings.HasPrefix(i.Lifecycle, "Terminat") || strings.HasPrefix(i.Lifecycle, "Detach") ||
		strings.HasPrefix(i.Lifecycle, "Warmed:Terminat")
}

// pending reports whether the instance is still being launched.
func (i instanceDesc) pending() bool { return strings.HasPrefix(i.Lifecycle, "Pending") }

// live counts the instances that are not terminating.
func (g *groupDesc) live() int {
	n := 0
	for _, in := range g.Instances {
		if !in.terminating() {
			n++
		}
	}
	return n
}

// findInstance returns the group's instance with id.
func (g *groupDesc) findInstance(id string) (instanceDesc, bool) {
	for _, in := range g.Instances {
		if in.ID == id {
			return in, true
		}
	}
	return instanceDesc{}, false
}

// defaultZone is the zone a placeholder or template is put in: the zone of
// the first subnet, else the first of the group's zones.
func (g *groupDesc) defaultZone(subnetZone func(string) string) string {
	for _, s := range g.Subnets {
		if z := subnetZone(s); z != "" {
			return z
		}
	}
	if len(g.Zones) > 0 {
		return g.Zones[0]
	}
	return ""
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// describeGroup validates and translates a DescribeAutoScalingGroups entry.
func describeGroup(a astypes.AutoScalingGroup) (groupDesc, error) {
	name := deref(a.AutoScalingGroupName)
	if name == "" {
		return groupDesc{}, badDescription("an Auto Scaling group without a name")
	}
	if a.MinSize == nil || a.MaxSize == nil || a.DesiredCapacity == nil {
		return groupDesc{}, badDescription("the Auto Scaling group %q lacks its min, max or desired capacity", name)
	}
	g := groupDesc{Name: name, Min: int(*a.MinSize), Max: int(*a.MaxSize), Desired: int(*a.DesiredCapacity),
		Tags: map[string]string{}, LaunchConfiguration: deref(a.LaunchConfigurationName), Zones: a.AvailabilityZones}
	if g.Min < 0 || g.Max < g.Min || g.Max > maxGroupSize || g.Desired < 0 || g.Desired > g.Max {
		return groupDesc{}, badDescription("the Auto Scaling group %q has min %d, max %d, desired %d", name, g.Min, g.Max, g.Desired)
	}
	seen := map[string]bool{}
	for _, in := range a.Instances {
		id := deref(in.InstanceId)
		if id == "" || seen[id] {
			return groupDesc{}, badDescription("the Auto Scaling group %q lists an instance without an id or twice (%q)", name, id)
		}
		seen[id] = true
		d := instanceDesc{ID: id, Zone: deref(in.AvailabilityZone), Lifecycle: string(in.LifecycleState),
			Type: deref(in.InstanceType), Protected: deref(in.ProtectedFromScaleIn), LaunchConfiguration: deref(in.LaunchConfigurationName)}
		if lt := in.LaunchTemplate; lt != nil {
			d.LaunchTemplate = &launchTemplateRef{ID: deref(lt.LaunchTemplateId), Name: deref(lt.LaunchTemplateName), Version: deref(lt.Version)}
		}
		g.Instances = append(g.Instances, d)
	}
	sort.Slice(g.Instances, func(i, j int) bool { return g.Instances[i].ID < g.Instances[j].ID })
	for _, t := range a.Tags {
		if k := deref(t.Key); k != "" {
			g.Tags[k] = deref(t.Value)
		}
	}
	if lt := a.LaunchTemplate; lt != nil {
		g.LaunchTemplate = &launchTemplateRef{ID: deref(lt.LaunchTemplateId), Name: deref(lt.LaunchTemplateName), Version: deref(lt.Version)}
	}
	if mp := a.MixedInstancesPolicy; mp != nil && mp.LaunchTemplate != nil {
		g.Mixed = true
		g.Distribution = distributionOf(mp)
		if spec := mp.LaunchTemplate.LaunchTemplateSpecification; spec != nil {
			g.LaunchTemplate = &launchTemplateRef{ID: deref(spec.LaunchTemplateId), Name: deref(spec.LaunchTemplateName), Version: deref(spec.Version)}
		}
		for _, o := range mp.LaunchTemplate.Overrides {
			if t := deref(o.InstanceType); t != "" {
				g.MixedOverrides = append(g.MixedOverrides, t)
			}
			if ref := overrideTemplate(o); ref != nil {
				g.OverrideTemplates = append(g.OverrideTemplates, *ref)
			}
			if r := o.InstanceRequirements; r != nil {
				g.MixedRequirements = append(g.MixedRequirements, requirementsOverride{Requirements: *r, LaunchTemplate: overrideTemplate(o)})
			}
		}
	}
	if g.LaunchTemplate != nil && g.LaunchTemplate.ID == "" && g.LaunchTemplate.Name == "" {
		return groupDesc{}, badDescription("the Auto Scaling group %q names a launch template with neither id nor name", name)
	}
	for _, s := range strings.Split(deref(a.VPCZoneIdentifier), ",") {
		if s = strings.TrimSpace(s); s != "" {
			g.Subnets = append(g.Subnets, s)
		}
	}
	return g, nil
}

// instanceType is what the template needs of an EC2 instance type.
type instanceType struct {
	Name      string
	VCPU      int64
	MemoryMiB int64
	// Arch is the Kubernetes architecture: amd64 or arm64.
	Arch            string
	GPUs            int64
	GPUManufacturer string
	GPUName         string
	// GPUMemoryMiB is the memory of one GPU (of the first kind the type
	// lists); 0 when the type does not say.
	GPUMemoryMiB int64
	// GPUModelsDiffer: a template type of several types (minimumType)
	// whose GPUs differ in model or memory; nothing model-specific is
	// promised then.
	GPUModelsDiffer bool
	// NeuronDevices are the type's AWS Neuron devices (Inferentia,
	// Trainium): how many, their name, NeuronCores and memory (MiB) each.
	NeuronDevices   int64
	NeuronName      string
	NeuronCores     int64
	NeuronMemoryMiB int64
	// MaxPods is ENIs * (IPv4 addresses per ENI - 1) + 2, as the VPC CNI
	// allows; 0 when the type does not say.
	MaxPods int64
}

// describeInstanceType validates and translates a DescribeInstanceTypes entry.
func describeInstanceType(info ec2types.InstanceTypeInfo) (instanceType, error) {
	name := string(info.InstanceType)
	if name == "" {
		return instanceType{}, badDescription("an instance type without a name")
	}
	t := instanceType{Name: name, Arch: "amd64"}
	if info.VCpuInfo != nil {
		t.VCPU = int64(deref(info.VCpuInfo.DefaultVCpus))
	}
	if info.MemoryInfo != nil {
		t.MemoryMiB = deref(info.MemoryInfo.SizeInMiB)
	}
	if t.VCPU <= 0 || t.VCPU > 1<<16 || t.MemoryMiB <= 0 || t.MemoryMiB > 1<<32 {
		return instanceType{}, badDescription("instance type %q has %d vCPUs and %d MiB of memory", name, t.VCPU, t.MemoryMiB)
	}
	if info.ProcessorInfo != nil {
		t.Arch = kubeArch(info.ProcessorInfo.SupportedArchitectures)
	}
	if info.GpuInfo != nil {
		for _, g := range info.GpuInfo.Gpus {
			n := int64(deref(g.Count))
			if n < 0 || n > 1024 {
				return instanceType{}, badDescription("instance type %q has %d GPUs", name, n)
			}
			t.GPUs += n
			if t.GPUName == "" {
				t.GPUManufacturer, t.GPUName = deref(g.Manufacturer), deref(g.Name)
				if g.MemoryInfo != nil {
					t.GPUMemoryMiB = max(int64(deref(g.MemoryInfo.SizeInMiB)), 0)
				}
			}
		}
	}
	if info.NeuronInfo != nil {
		for _, d := range info.NeuronInfo.NeuronDevices {
			n := int64(deref(d.Count))
			if n < 0 || n > 1024 {
				return instanceType{}, badDescription("instance type %q has %d Neuron devices", name, n)
			}
			t.NeuronDevices += n
			if t.NeuronName == "" {
				t.NeuronName = deref(d.Name)
				if d.CoreInfo != nil {
					t.NeuronCores = max(int64(deref(d.CoreInfo.Count)), 0)
				}
				if d.MemoryInfo != nil {
					t.NeuronMemoryMiB = max(int64(deref(d.MemoryInfo.SizeInMiB)), 0)
				}
			}
		}
	}
	if info.NetworkInfo != nil {
		enis := int64(deref(info.NetworkInfo.MaximumNetworkInterfaces))
		ips := int64(deref(info.NetworkInfo.Ipv4AddressesPerInterface))
		if enis > 0 && ips > 1 && enis <= 1024 && ips <= 1024 {
			t.MaxPods = enis*(ips-1) + 2
		}
	}
	return t, nil
}

// kubeArch maps the EC2 architectures of a type to the Kubernetes one.
func kubeArch(archs []ec2types.ArchitectureType) string {
	for _, a := range archs {
		switch a {
		case ec2types.ArchitectureTypeX8664:
			return "amd64"
		case ec2types.ArchitectureTypeArm64:
			return "arm64"
		}
	}
	return "amd64"
}
