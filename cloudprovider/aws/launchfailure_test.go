package aws

import (
	"context"
	"testing"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/test/awsfake"
)

// Messages of failed launches as EC2 words them (the text AWS quotes in a
// failed scaling activity), from real activities and RunInstances errors.
const (
	msgICE = "We currently do not have sufficient m5.large capacity in the Availability Zone you requested (us-east-1a). " +
		"Our system will be working on provisioning additional capacity. You can currently get m5.large capacity by not " +
		"specifying an Availability Zone in your request or choosing us-east-1b, us-east-1c, us-east-1d, us-east-1f."
	msgVCPU = "You have requested more vCPU capacity than your current vCPU limit of 32 allows for the instance bucket that " +
		"the specified instance type belongs to. Please visit http://aws.amazon.com/contact-us/ec2-request to request an " +
		"adjustment to this limit."
	msgInstanceLimit = "You have requested more instances (7) than your current instance limit of 6 allows for the specified " +
		"instance type. Please visit http://aws.amazon.com/contact-us/ec2-request to request an adjustment to this limit."
	msgZoneUnsupported = "Your requested instance type (m5.large) is not supported in your requested Availability Zone " +
		"(us-east-1e). Please retry your request by not specifying an Availability Zone or choosing us-east-1a, us-east-1b."
	msgConfigUnsupported = "The requested configuration is currently not supported. Please check the documentation for " +
		"supported configurations."
	msgNoAddresses  = "There are not enough free addresses in subnet 'subnet-a' to satisfy the requested number of instances."
	msgNoTemplate   = "The specified launch template, with template ID lt-0001, does not exist."
	msgNoImage      = "The image id '[ami-0123456789abcdef0]' does not exist"
	msgNoSpot       = "There is no Spot capacity available that matches your request."
	msgUnfulfilled  = "Unable to fulfill capacity due to your request configuration. Please adjust your request and try again."
	msgSpotPrice    = "Your Spot request price of 0.01 is lower than the minimum required Spot request fulfillment price of 0.0353."
	msgSpotCount    = "Max spot instance count exceeded"
	msgUnauthorized = "You are not authorized to perform this operation. Encoded authorization failure message: 3kd9..."
)

var launchFailureCases = []struct {
	name      string
	f         awsfake.LaunchFailure
	wantClass cloudprovider.InstanceErrorClass
	wantCode  string
}{
	{"no capacity, launch template group", awsfake.LaunchFailure{Code: "InsufficientInstanceCapacity", Message: msgICE, Form: awsfake.Plain},
		cloudprovider.OutOfResourcesErrorClass, "InsufficientInstanceCapacity"},
	{"no capacity, mixed instances", awsfake.LaunchFailure{Code: "InsufficientInstanceCapacity", Message: msgICE},
		cloudprovider.OutOfResourcesErrorClass, "InsufficientInstanceCapacity"},
	{"vCPU quota", awsfake.LaunchFailure{Code: "VcpuLimitExceeded", Message: msgVCPU, Form: awsfake.Plain},
		cloudprovider.OutOfResourcesErrorClass, "VcpuLimitExceeded"},
	{"instance quota", awsfake.LaunchFailure{Code: "InstanceLimitExceeded", Message: msgInstanceLimit, Form: awsfake.Plain},
		cloudprovider.OutOfResourcesErrorClass, "InstanceLimitExceeded"},
	{"type not offered in the zone", awsfake.LaunchFailure{Code: "Unsupported", Message: msgZoneUnsupported, Form: awsfake.Plain},
		cloudprovider.OutOfResourcesErrorClass, "Unsupported"},
	{"type not offered in the zone, fleet", awsfake.LaunchFailure{Code: "InvalidFleetConfiguration", Message: msgZoneUnsupported},
		cloudprovider.OutOfResourcesErrorClass, "Unsupported"},
	{"no Spot capacity", awsfake.LaunchFailure{Code: "InsufficientInstanceCapacity", Message: msgNoSpot, Form: awsfake.FleetSpot},
		cloudprovider.OutOfResourcesErrorClass, "InsufficientInstanceCapacity"},
	{"Spot unfulfillable", awsfake.LaunchFailure{Code: "UnfulfillableCapacity", Message: msgUnfulfilled, Form: awsfake.FleetSpot},
		cloudprovider.OutOfResourcesErrorClass, "UnfulfillableCapacity"},
	{"Spot price too low", awsfake.LaunchFailure{Code: "SpotMaxPriceTooLow", Message: msgSpotPrice, Form: awsfake.FleetSpot},
		cloudprovider.OutOfResourcesErrorClass, "SpotMaxPriceTooLow"},
	{"Spot instance count quota", awsfake.LaunchFailure{Code: "MaxSpotInstanceCountExceeded", Message: msgSpotCount, Form: awsfake.FleetSpot},
		cloudprovider.OutOfResourcesErrorClass, "MaxSpotInstanceCountExceeded"},
	{"no Spot capacity in the zone", awsfake.LaunchFailure{Code: "InsufficientInstanceCapacity", Message: msgICE, Form: awsfake.FleetSpot},
		cloudprovider.OutOfResourcesErrorClass, "InsufficientInstanceCapacity"},
	{"configuration not supported", awsfake.LaunchFailure{Code: "Unsupported", Message: msgConfigUnsupported, Form: awsfake.Plain},
		cloudprovider.OtherErrorClass, "Unsupported"},
	{"configuration not supported, fleet", awsfake.LaunchFailure{Code: "Unsupported", Message: msgConfigUnsupported},
		cloudprovider.OtherErrorClass, "Unsupported"},
	{"subnet out of addresses", awsfake.LaunchFailure{Code: "InsufficientFreeAddressesInSubnet", Message: msgNoAddresses, Form: awsfake.Plain},
		cloudprovider.OtherErrorClass, "InsufficientFreeAddressesInSubnet"},
	{"launch template gone", awsfake.LaunchFailure{Code: "InvalidLaunchTemplateId.NotFound", Message: msgNoTemplate, Form: awsfake.Plain},
		cloudprovider.OtherErrorClass, "InvalidLaunchTemplate"},
	{"image gone", awsfake.LaunchFailure{Code: "InvalidAMIID.NotFound", Message: msgNoImage, Form: awsfake.Plain},
		cloudprovider.OtherErrorClass, "InvalidAMIID"},
	{"not authorized", awsfake.LaunchFailure{Code: "UnauthorizedOperation", Message: msgUnauthorized, Form: awsfake.Plain},
		cloudprovider.OtherErrorClass, "UnauthorizedOperation"},
}

// TestFailedLaunchesClassedAsAWSWritesThem: the placeholders of a group
// whose launches fail carry the failure's class and code, read from the
// scaling activity AWS records (through the SDK against the fake), in each
// form AWS words it: a launch-template group's message without the code,
// a mixed-instances group's with it.
func TestFailedLaunchesClassedAsAWSWritesThem(t *testing.T) {
	for _, tc := range launchFailureCases {
		t.Run(tc.name, func(t *testing.T) {
			s := startFake(t)
			s.AddGroup(groupOf("ng", 0))
			s.FailLaunchesWith("ng", tc.f)
			p := newTestProvider(t, []string{"0:5:ng"}, nil)
			ctx := context.Background()
			if err := p.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			if err := group(t, p, "ng").IncreaseSize(ctx, 1); err != nil {
				t.Fatal(err)
			}
			refreshUntil(t, p, "a failed placeholder", func() bool {
				_, _, failed := states(group(t, p, "ng").instances)
				return failed == 1
			})
			ei := group(t, p, "ng").instances[0].Status.ErrorInfo
			if ei.ErrorClass != tc.wantClass || ei.ErrorCode != tc.wantCode {
				t.Errorf("placeholder error %v/%q (message %q), want %v/%q", ei.ErrorClass, ei.ErrorCode, ei.ErrorMessage, tc.wantClass, tc.wantCode)
			}
		})
	}
}

func TestClassifyLaunchFailure(t *testing.T) {
	cases := []struct {
		msg   string
		class cloudprovider.InstanceErrorClass
		code  string
	}{
		{"We currently do not have sufficient capacity. Launching EC2 instance failed. Status Reason: InsufficientInstanceCapacity", cloudprovider.OutOfResourcesErrorClass, "InsufficientInstanceCapacity"},
		{"VcpuLimitExceeded: something", cloudprovider.OutOfResourcesErrorClass, "VcpuLimitExceeded"},
		{"Insufficient capacity. Launching EC2 instance failed.", cloudprovider.OutOfResourcesErrorClass, "InsufficientInstanceCapacity"},
		{"Max spot instance count exceeded. Launching EC2 instance failed.", cloudprovider.OutOfResourcesErrorClass, "MaxSpotInstanceCountExceeded"},
		{"Your quota allows for 0 more running instance(s). You requested at least 1. Launching EC2 instance failed.", cloudprovider.OutOfResourcesErrorClass, "InstanceLimitExceeded"},
		{"UnsupportedOperation: something else", cloudprovider.OtherErrorClass, "LaunchFailed"},
		{"InvalidLaunchTemplate.NotFound", cloudprovider.OtherErrorClass, "InvalidLaunchTemplate"},
		{"You are not authorized to use launch template: lt-0001", cloudprovider.OtherErrorClass, "UnauthorizedOperation"},
		{"", cloudprovider.OtherErrorClass, "LaunchFailed"},
	}
	for _, tc := range cases {
		got := classifyLaunchFailure(tc.msg)
		if got.Class != tc.class || got.Code != tc.code {
			t.Errorf("%q: got %v/%q, want %v/%q", tc.msg, got.Class, got.Code, tc.class, tc.code)
		}
	}
}

// TestClassifySpotLaunchFailures: a Spot group's failed activity ("Could
// not launch Spot Instances. <code> - <message>") is out of resources for
// each code that says the Spot market has no room for it now, so that the
// group is backed off and another (On-Demand) group is tried.
func TestClassifySpotLaunchFailures(t *testing.T) {
	cases := []struct{ code, msg string }{
		{"InsufficientInstanceCapacity", msgNoSpot},
		{"InsufficientInstanceCapacity", msgICE},
		{"SpotMaxPriceTooLow", msgSpotPrice},
		{"UnfulfillableCapacity", msgUnfulfilled},
		{"MaxSpotInstanceCountExceeded", msgSpotCount},
	}
	for _, tc := range cases {
		status := "Could not launch Spot Instances. " + tc.code + " - " + tc.msg + ". Launching EC2 instance failed."
		got := classifyLaunchFailure(status)
		if got.Class != cloudprovider.OutOfResourcesErrorClass || got.Code != tc.code {
			t.Errorf("%q: got %v/%q, want OutOfResources/%q", status, got.Class, got.Code, tc.code)
		}
	}
}
