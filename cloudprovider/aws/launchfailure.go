package aws

import (
	"strings"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// launchFailure is a failed scaling activity as an instance error.
type launchFailure struct {
	Class   cloudprovider.InstanceErrorClass
	Code    string
	Message string
}

// The classes follow upstream's: OutOfResources when AWS has no room for
// the group now (no capacity of the type in the zone, the type not offered
// there, a quota, the Spot market), so another group may well succeed;
// Other for what the group's own configuration, permissions, subnets or
// reservations cause. Both back the group off.
const (
	outOfResources = cloudprovider.OutOfResourcesErrorClass
	otherFailure   = cloudprovider.OtherErrorClass
)

// launchPhrase is a sentence of EC2's launch errors, as a failed scaling
// activity's status message quotes it: a launch-template or
// launch-configuration group's message is EC2's message without its code
// ("We currently do not have sufficient m5.large capacity in the
// Availability Zone you requested (us-east-1a). ... Launching EC2 instance
// failed."), a mixed-instances group's names the code ("Could not launch
// On-Demand Instances. InsufficientInstanceCapacity - We currently ...").
type launchPhrase struct {
	phrase string // matched without regard to case
	code   string
	class  cloudprovider.InstanceErrorClass
}

// launchPhrases are tried in order, before the codes: the same code can
// mean either class ("Unsupported": a type the zone does not offer, or a
// configuration EC2 does not support).
var launchPhrases = []launchPhrase{
	{"requested configuration is currently not supported", "Unsupported", otherFailure},
	{"Capacity Reservation", "ReservationCapacityExceeded", otherFailure},
	{"not enough free addresses in subnet", "InsufficientFreeAddressesInSubnet", otherFailure},
	{"not authorized", "UnauthorizedOperation", otherFailure},
	{"The image id", "InvalidAMIID", otherFailure},
	{"do not have sufficient", "InsufficientInstanceCapacity", outOfResources},
	{"no Spot capacity available", "InsufficientInstanceCapacity", outOfResources},
	{"insufficient capacity", "InsufficientInstanceCapacity", outOfResources},
	{"than your current vCPU limit", "VcpuLimitExceeded", outOfResources},
	{"than your current instance limit", "InstanceLimitExceeded", outOfResources},
	{"Your quota allows for", "InstanceLimitExceeded", outOfResources},
	{"is not supported in your requested Availability Zone", "Unsupported", outOfResources},
	{"Max spot instance count exceeded", "MaxSpotInstanceCountExceeded", outOfResources},
	{"minimum required Spot request fulfillment price", "SpotMaxPriceTooLow", outOfResources},
	{"Unable to fulfill capacity", "UnfulfillableCapacity", outOfResources},
}

// outOfResourcesCodes are EC2 error codes of launch failures that say AWS
// has no room for the group now.
var outOfResourcesCodes = []string{
	"InsufficientInstanceCapacity", "InsufficientCapacity", "InsufficientHostCapacity", "VcpuLimitExceeded",
	"InstanceLimitExceeded", "MaxSpotInstanceCountExceeded", "SpotMaxPriceTooLow", "UnfulfillableCapacity", "Unsupported",
}

// otherLaunchCodes are EC2 error codes of launch failures of the group's
// configuration, permissions, subnets or reservations.
var otherLaunchCodes = []string{
	"InvalidLaunchTemplate", "LaunchTemplateNotFound", "InvalidParameterValue", "InvalidParameterCombination",
	"InvalidAMIID", "InvalidKeyPair", "InvalidSubnet", "InvalidGroup", "AuthFailure", "UnauthorizedOperation",
	"OptInRequired", "PendingVerification", "InvalidBlockDeviceMapping", "InsufficientFreeAddressesInSubnet",
	"InsufficientReservedInstanceCapacity", "ReservationCapacityExceeded", "InvalidFleetConfiguration",
}

// classifyLaunchFailure classes a failed activity by its status message
// (and description): a known sentence of EC2's, else an error code in it,
// else a launch template named in it; otherwise Other, code LaunchFailed.
func classifyLaunchFailure(message string) launchFailure {
	lower := strings.ToLower(message)
	for _, p := range launchPhrases {
		if strings.Contains(lower, strings.ToLower(p.phrase)) {
			return launchFailure{Class: p.class, Code: p.code, Message: message}
		}
	}
	for _, c := range outOfResourcesCodes {
		if containsWord(message, c) {
			return launchFailure{Class: outOfResources, Code: c, Message: message}
		}
	}
	for _, c := range otherLaunchCodes {
		if containsWord(message, c) {
			return launchFailure{Class: otherFailure, Code: c, Message: message}
		}
	}
	if strings.Contains(lower, "launch template") {
		return launchFailure{Class: otherFailure, Code: "InvalidLaunchTemplate", Message: message}
	}
	return launchFailure{Class: otherFailure, Code: "LaunchFailed", Message: message}
}

// containsWord reports whether code occurs in s not as part of a longer
// word ("Unsupported" is not found in "UnsupportedOperation").
func containsWord(s, code string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], code)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(code)
		if (start == 0 || !isWordByte(s[start-1])) && (end == len(s) || !isWordByte(s[end])) {
			return true
		}
		i = start + 1
	}
}

func isWordByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_'
}
