package awsfake

import (
	"time"
)

// InstanceType describes an EC2 instance type as DescribeInstanceTypes
// reports it.
type InstanceType struct {
	Name            string
	VCPU            int
	MemoryMiB       int64
	Arch            string // x86_64 or arm64
	GPUs            int
	GPUManufacturer string
	GPUName         string
	GPUMemoryMiB    int64
	// NeuronDevices are the type's AWS Neuron devices (NeuronInfo): how
	// many, their name (Inferentia2, Trainium, ...), NeuronCores and
	// memory each.
	NeuronDevices   int
	NeuronName      string
	NeuronCores     int
	NeuronMemoryMiB int64
	MaxENIs         int
	IPv4PerENI      int
	// Burstable marks a burstable performance type (T family), which
	// InstanceRequirements leave out unless BurstablePerformance includes them.
	Burstable bool
}

// LaunchTemplateVersion is one version of a launch template.
type LaunchTemplateVersion struct {
	Number       int64
	InstanceType string
	// MarketType is the version's InstanceMarketOptions.MarketType:
	// "spot" launches Spot instances, "" On-Demand ones.
	MarketType string
	// ImageID is the version's AMI (DescribeImages knows those AddImage
	// registered); "" renders as ami-00000000000000000.
	ImageID string
	// CapacityReservation is the version's CapacityReservationSpecification
	// (nil: none; reservations.go). MarketType "capacity-block" launches
	// into the Capacity Block it targets.
	CapacityReservation *CapacityReservationSpec
}

// LaunchTemplate is an EC2 launch template; ID ("lt-" + hex) is generated when
// empty.
type LaunchTemplate struct {
	ID             string
	Name           string
	DefaultVersion int64
	Versions       []LaunchTemplateVersion
}

// LaunchConfiguration is an Auto Scaling launch configuration.
type LaunchConfiguration struct {
	Name         string
	InstanceType string
}

// LaunchTemplateSpec names a launch template by ID or name; Version is
// "$Default", "$Latest" or a version number.
type LaunchTemplateSpec struct {
	ID      string
	Name    string
	Version string
}

// MixedInstancesPolicy is a group's launch template with instance type
// overrides (launches use the first override), or with one override of
// InstanceRequirements (attribute-based selection: AWS refuses both kinds
// in one policy; launches use the smallest matching type, requirements.go).
type MixedInstancesPolicy struct {
	LaunchTemplate LaunchTemplateSpec
	Overrides      []string
	Requirements   *InstanceRequirements
	// OnDemandBaseCapacity and OnDemandPercentageAboveBaseCapacity are the
	// policy's instances distribution: the first OnDemandBaseCapacity
	// instances are On-Demand, then that percentage of the others (nil is
	// AWS's default, 100); the rest are Spot.
	OnDemandBaseCapacity                int
	OnDemandPercentageAboveBaseCapacity *int
}

// Group is an Auto Scaling group.
type Group struct {
	Name                    string
	Min, Max, Desired       int
	LaunchTemplate          *LaunchTemplateSpec
	LaunchConfigurationName string
	MixedInstances          *MixedInstancesPolicy
	Subnets                 []string // VPCZoneIdentifier
	Tags                    map[string]string
	// TerminationPolicies order the victims of a scale-in: "Default" (also
	// when empty: the most populated zone's newest instance first, as the
	// fake always did), "NewestInstance" or "OldestInstance" (the zones are
	// balanced first either way). Instances protected from scale-in are
	// never victims.
	TerminationPolicies []string
	// NewInstancesProtectedFromScaleIn protects the group's new instances
	// from scale-in as they launch.
	NewInstancesProtectedFromScaleIn bool
}

// Instance is an instance of a group.
type Instance struct {
	ID           string
	Group        string
	Zone         string
	InstanceType string
	Lifecycle    string // Pending, InService, Terminating or Terminated
	Launched     time.Time
	// ProtectedFromScaleIn keeps the group from choosing the instance when
	// its desired capacity goes below its active instances
	// (SetInstanceProtection); terminating it by ID still works.
	ProtectedFromScaleIn bool
	// LaunchTemplate is the launch template the instance was launched
	// with: its ID, name and version number, as DescribeAutoScalingGroups
	// reports it (zero when launched from a launch configuration);
	// LaunchConfigurationName the launch configuration otherwise. Neither
	// changes when the group's launch specification does.
	LaunchTemplate          LaunchTemplateSpec
	LaunchConfigurationName string
	// Spot is whether the instance was launched as a Spot instance (its
	// group's instances distribution, or its launch template's market
	// type): DescribeInstances reports its InstanceLifecycle "spot".
	Spot bool
	// CapacityReservationID is the Capacity Reservation (or Capacity
	// Block) the instance was launched into, "" for none; it holds one of
	// its instances until it is Terminated (reservations.go).
	CapacityReservationID string
}

// Lifecycle states of an instance.
const (
	LifecyclePending     = "Pending"
	LifecycleInService   = "InService"
	LifecycleTerminating = "Terminating"
	LifecycleTerminated  = "Terminated"
)

// activity is a scaling activity of a group.
type activity struct {
	ID          string
	Group       string
	Description string
	Cause       string
	Start, End  time.Time
	StatusCode  string // Successful, Failed, InProgress
	StatusMsg   string
	Progress    int
	Details     string
}

// Scaling activity status codes.
const (
	statusInProgress = "InProgress"
	statusSuccessful = "Successful"
	statusFailed     = "Failed"
)

// launchFailure is the FailLaunches setting of a group (or a launch
// specification that cannot launch).
type launchFailure struct {
	code, message string
	form          StatusForm
}
