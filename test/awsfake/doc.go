// Package awsfake is a stateful fake of the AWS Auto Scaling and EC2 APIs (and
// EKS's DescribeNodegroup) for tests: an HTTP server on 127.0.0.1 that speaks the AWS query protocol
// (form-encoded POST bodies carrying Action and Version, XML answers, AWS's
// error envelopes and codes, NextToken pagination), written from the AWS API
// reference. Point the AWS SDK at it with its standard endpoint variables
// AWS_ENDPOINT_URL_AUTO_SCALING and AWS_ENDPOINT_URL_EC2 (Server.Env gives
// them, with fake credentials, for a child process); one server answers both
// services, told apart by the action name (else the form's Version).
//
// # Actions
//
// Auto Scaling (2011-01-01): DescribeAutoScalingGroups (names: up to 50, or
// up to MaxRecords when larger, else ValidationError; Filters with tag-key,
// tag-value and tag:<key>, MaxRecords up to 100, NextToken),
// SetDesiredCapacity (ValidationError above max or below min),
// TerminateInstanceInAutoScalingGroup (ShouldDecrementDesiredCapacity;
// ValidationError below min or for an unknown instance,
// ScalingActivityInProgress for one already terminating),
// DescribeScalingActivities (newest first; group, activity IDs, MaxRecords,
// NextToken), DescribeLaunchConfigurations, DescribeAutoScalingInstances,
// SetInstanceProtection (at most 50 instances, each an active member of the
// group, else ValidationError and nothing changes).
// EC2 (2016-11-15): DescribeInstanceTypes (InstanceType.N, MaxResults 5-100,
// NextToken), DescribeLaunchTemplateVersions (LaunchTemplateId or
// LaunchTemplateName, LaunchTemplateVersion.N with $Default, $Latest or a
// number; all versions in one answer), DescribeLaunchTemplates
// (LaunchTemplateId.N, LaunchTemplateName.N, MaxResults 1-200, NextToken;
// latestVersionNumber and defaultVersionNumber; a template that does not
// exist fails the call), CreateLaunchTemplateVersion (SourceVersion,
// LaunchTemplateData.InstanceType and .ImageId; numbered after the latest),
// ModifyLaunchTemplate (SetDefaultVersion), DescribeSubnets (SubnetId.N),
// DescribeImages (ImageId.N, the images AddImage registered),
// GetInstanceTypesFromInstanceRequirements (ArchitectureType.N,
// VirtualizationType.N, InstanceRequirements: the fields it honours are
// listed on InstanceRequirements; MaxResults, NextToken),
// DescribeSpotPriceHistory (the changes AddSpotPrice recorded:
// InstanceType.N, ProductDescription.N, AvailabilityZone, StartTime with
// the price in effect then, EndTime, MaxResults 1-1000, NextToken, the
// filters instance-type, product-description, availability-zone),
// DescribeInstances (InstanceId.N or all, MaxResults, NextToken;
// instanceLifecycle "spot" for the instances launched as Spot by their
// group's instances distribution or launch template market type),
// DescribeCapacityReservations (CapacityReservationId.N or all, MaxResults
// 1-1000, NextToken; an unknown ID is InvalidCapacityReservationId.NotFound;
// the reservations AddCapacityReservation added, reservations.go). Other
// EC2 Filter.N parameters are refused rather than ignored. Any other
// action is 400 InvalidAction.
// Price List Query API (JSON 1.1, AWS_ENDPOINT_URL_PRICING, told apart by
// X-Amz-Target AWSPriceListService.*; signed for us-east-1, eu-central-1,
// ap-south-1 or cn-northwest-1): GetProducts of AmazonEC2 (TERM_MATCH,
// EQUALS, CONTAINS, ANY_OF, NONE_OF filters, MaxResults 1-100, NextToken;
// PriceList documents as JSON strings) of the prices AddOnDemandPrice
// added, each with its Windows, Dedicated and unused-reservation products.
// EKS (REST-JSON, AWS_ENDPOINT_URL_EKS, told apart by its /clusters/ path):
// DescribeNodegroup (GET /clusters/{name}/node-groups/{nodegroupName}) of
// the node groups a test registers with AddNodegroup: labels, taints (EKS's
// NO_SCHEDULE spelling), capacityType, the Auto Scaling groups; an unknown
// node group or cluster is 404 ResourceNotFoundException, errors carry
// their code in X-Amzn-ErrorType.
//
// # Behaviour
//
// The fake holds instance types, subnets, launch templates and launch
// configurations (added by the test) and Auto Scaling groups (AddGroup;
// DeleteGroup deletes one with its instances), and moves each
// group towards its desired capacity on its own (on every call and every 50
// ms): new instances ("i-" and 17 hex digits) are Pending, then InService
// after the start delay; zones go round-robin over the group's subnets; the
// instance type is the first mixed-instances override (with
// InstanceRequirements, the smallest matching type of the launch template
// image's architecture), else the launch template version's, else the
// launch configuration's. Each instance remembers what it was launched with
// and DescribeAutoScalingGroups reports that, not the group's settings now:
// the launch template's ID, name and version number ($Default and $Latest
// resolved at launch), or the launch configuration. A desired capacity
// below the active instances terminates some that are not protected from
// scale-in (from the most populated zone; the newest first, or the oldest
// first for a group whose TerminationPolicies start with OldestInstance); with
// too few unprotected, the rest waits until protection is lifted. Every launch and termination is a scaling activity
// (InProgress, then Successful). A launch that cannot happen - FailLaunches,
// or a launch template, version or configuration that does not exist - is a
// Failed activity whose StatusMessage carries the error code, repeated at
// most every 10 s while the group is short (at once after an increase), and
// the desired capacity stays.
//
// Capacity Reservations (reservations.go): a launch template version's
// CapacityReservationSpecification picks where each launch goes. A target
// (a reservation ID, or a resource group: its first active member of the
// type with room) or the market type capacity-block launches into that
// reservation only, in its zone; preference capacity-reservations-only
// into an active open reservation of the type in one of the group's zones
// only; open (also without a specification) into such a reservation while
// one has room, else On-Demand; none On-Demand. An instance holds its
// reservation until it is Terminated (AvailableInstanceCount goes down at
// launch, up again then). A launch that finds no room - or a reservation
// not active (a Capacity Block before its StartDate or from its EndDate
// on), unknown, or of another instance type - launches nothing beyond the
// room there is: it is a Failed activity as above, in the plain
// launch-template form, with EC2's codes ReservationCapacityExceeded
// ("Insufficient capacity in the Capacity Reservation cr-... for instance
// type ..."; the wording is the fake's), IncorrectState,
// InvalidCapacityReservationId.NotFound or InvalidParameterCombination.
// Instances of a Capacity Block are not terminated when it ends.
//
// # Fault knobs
//
// SetThrottle answers that share of calls (spread evenly) with 400
// Throttling (Auto Scaling) or 503 RequestLimitExceeded (EC2), codes the
// SDK's retryer treats as throttling; FailLaunches fails a group's launches
// with a given code (FailLaunchesWith also picks how the failed activity's
// status message words it: with the code, as for mixed-instances groups, or
// EC2's message alone, as for launch-template groups); SetStartDelay keeps instances Pending (and Terminating)
// for a while; Deny answers actions as AWS does for a policy that lacks
// them (Auto Scaling: 403 AccessDenied; EC2: 403 UnauthorizedOperation;
// EKS: 403 AccessDeniedException), and
// AllowOnly denies all but an IAM policy's action list; BeforeCall runs a test's function before an action is
// handled (to change the world between a client's read and its write).
// Calls, Throttled and Terminated report what was asked.
//
// Requests must carry an AWS Signature Version 4 Authorization header whose
// credential scope names the server's region and the service: without one
// the answer is 403 MissingAuthenticationToken, a malformed one 400
// IncompleteSignature, another region or service 403 SignatureDoesNotMatch.
// The signature itself and the access key are not checked.
//
// PlayKubelet plays the kubelet of the fake's instances against a Kubernetes
// API server: a kwok-managed Node per InService instance, removed when the
// instance terminates.
//
// The package knows nothing of any cloud provider implementation; it must not
// be imported by anything outside test/ and cloudprovider tests.
package awsfake
