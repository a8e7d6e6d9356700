package aws

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// AutoScalingAPI is what the provider calls of the Auto Scaling client.
type AutoScalingAPI interface {
	DescribeAutoScalingGroups(ctx context.Context, in *autoscaling.DescribeAutoScalingGroupsInput, opts ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingGroupsOutput, error)
	DescribeScalingActivities(ctx context.Context, in *autoscaling.DescribeScalingActivitiesInput, opts ...func(*autoscaling.Options)) (*autoscaling.DescribeScalingActivitiesOutput, error)
	DescribeLaunchConfigurations(ctx context.Context, in *autoscaling.DescribeLaunchConfigurationsInput, opts ...func(*autoscaling.Options)) (*autoscaling.DescribeLaunchConfigurationsOutput, error)
	SetDesiredCapacity(ctx context.Context, in *autoscaling.SetDesiredCapacityInput, opts ...func(*autoscaling.Options)) (*autoscaling.SetDesiredCapacityOutput, error)
	TerminateInstanceInAutoScalingGroup(ctx context.Context, in *autoscaling.TerminateInstanceInAutoScalingGroupInput, opts ...func(*autoscaling.Options)) (*autoscaling.TerminateInstanceInAutoScalingGroupOutput, error)
	SetInstanceProtection(ctx context.Context, in *autoscaling.SetInstanceProtectionInput, opts ...func(*autoscaling.Options)) (*autoscaling.SetInstanceProtectionOutput, error)
}

// EC2API is what the provider calls of the EC2 client.
type EC2API interface {
	DescribeInstanceTypes(ctx context.Context, in *ec2.DescribeInstanceTypesInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error)
	DescribeLaunchTemplateVersions(ctx context.Context, in *ec2.DescribeLaunchTemplateVersionsInput, opts ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplateVersionsOutput, error)
	DescribeSubnets(ctx context.Context, in *ec2.DescribeSubnetsInput, opts ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error)
}

// defaultMaxAttempts is the attempts of one call (AWS_MAX_ATTEMPTS or the
// shared config's max_attempts override it).
const defaultMaxAttempts = 8

// loadConfig loads the SDK's default configuration: credentials from the
// default chain (environment, shared config and credentials files, web
// identity / IRSA, EKS Pod Identity, instance metadata), the region from
// AWS_REGION, the shared config or, failing both, instance metadata; the
// endpoints as the SDK resolves them (AWS_ENDPOINT_URL_AUTO_SCALING,
// AWS_ENDPOINT_URL_EC2 among others). Calls are retried by the SDK's
// adaptive retryer, which slows down on throttling.
func loadConfig(ctx context.Context) (aws.Config, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithEC2IMDSRegion())
	if err != nil {
		return aws.Config{}, fmt.Errorf("loading the AWS SDK configuration: %w", err)
	}
	if cfg.Region == "" {
		return aws.Config{}, errors.New("no AWS region: set AWS_REGION (the chart's awsRegion), or run where instance metadata answers")
	}
	attempts := cfg.RetryMaxAttempts
	if attempts <= 0 {
		attempts = defaultMaxAttempts
	}
	cfg.Retryer = func() aws.Retryer { return newRetryer(attempts) }
	cfg.RetryMaxAttempts = 0 // applied above; the clients must not wrap it again
	return cfg, nil
}

// newRetryer is the adaptive retryer: throttled calls make it wait before
// the next attempt; the client-side retry quota is off, since the adaptive
// rate limit already spaces the attempts and a quota would turn a throttled
// burst into failures.
func newRetryer(attempts int) aws.Retryer {
	return retry.NewAdaptiveMode(func(o *retry.AdaptiveModeOptions) {
		o.StandardOptions = append(o.StandardOptions, func(so *retry.StandardOptions) {
			so.MaxAttempts = attempts
			so.RateLimiter = ratelimit.None
		})
	})
}

// throttleCodes are the error codes of a throttled call.
var throttleCodes = map[string]bool{
	"Throttling": true, "ThrottlingException": true, "RequestLimitExceeded": true, "RequestThrottled": true,
	"RequestThrottledException": true, "TooManyRequestsException": true, "SlowDown": true,
	"EC2ThrottledException": true, "BandwidthLimitExceeded": true,
}

// callError wraps a failed call with its operation. Throttling (even after
// the retryer's attempts), and for calls that change nothing any server or
// network failure, is cloudprovider.ErrTransient: no verdict on a group.
func callError(op string, err error, readOnly bool) error {
	if err == nil {
		return nil
	}
	if isThrottle(err) {
		return fmt.Errorf("%s: %w (throttled): %w", op, cloudprovider.ErrTransient, err)
	}
	if readOnly {
		var re *smithyhttp.ResponseError
		var ne net.Error
		if (errors.As(err, &re) && re.HTTPStatusCode() >= 500) || errors.As(err, &ne) {
			return fmt.Errorf("%s: %w: %w", op, cloudprovider.ErrTransient, err)
		}
	}
	return fmt.Errorf("%s: %w", op, err)
}

func isThrottle(err error) bool {
	var ae smithy.APIError
	if errors.As(err, &ae) && throttleCodes[ae.ErrorCode()] {
		return true
	}
	var qe ratelimit.QuotaExceededError
	return errors.As(err, &qe)
}

// launchFailure is a failed scaling activity as an instance error.
type launchFailure struct {
	Class   cloudprovider.InstanceErrorClass
	Code    string
	Message string
}

// outOfResourcesCodes are the launch failures that say AWS has no room for
// the group now: no capacity of the type in the zone, a quota, a type the
// zone does not offer. The group is backed off and another one tried.
var outOfResourcesCodes = []string{
	"InsufficientInstanceCapacity", "InsufficientCapacity", "VcpuLimitExceeded", "InstanceLimitExceeded",
	"MaxSpotInstanceCountExceeded", "SpotMaxPriceTooLow", "InsufficientFreeAddressesInSubnet",
	"InsufficientHostCapacity", "InsufficientReservedInstanceCapacity", "Unsupported",
}

// otherLaunchCodes are launch failures of the group's configuration; they
// back the group off too, with class Other.
var otherLaunchCodes = []string{
	"InvalidLaunchTemplate", "LaunchTemplateNotFound", "InvalidParameterValue", "InvalidParameterCombination",
	"InvalidAMIID", "InvalidKeyPair", "InvalidSubnet", "InvalidGroup", "AuthFailure", "UnauthorizedOperation",
	"OptInRequired", "PendingVerification", "InvalidBlockDeviceMapping",
}

// classifyLaunchFailure reads the code out of a failed activity's status
// message (and description).
func classifyLaunchFailure(message string) launchFailure {
	for _, c := range outOfResourcesCodes {
		if containsWord(message, c) {
			return launchFailure{Class: cloudprovider.OutOfResourcesErrorClass, Code: c, Message: message}
		}
	}
	for _, c := range otherLaunchCodes {
		if containsWord(message, c) {
			return launchFailure{Class: cloudprovider.OtherErrorClass, Code: c, Message: message}
		}
	}
	if strings.Contains(strings.ToLower(message), "launch template") {
		return launchFailure{Class: cloudprovider.OtherErrorClass, Code: "InvalidLaunchTemplate", Message: message}
	}
	return launchFailure{Class: cloudprovider.OtherErrorClass, Code: "LaunchFailed", Message: message}
}

// containsWord reports whether code occurs in s not as part of a longer
// word ("Unsupported" is not found in "UnsupportedOperation"... it is: the
// next rune decides).
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

// newClients builds the SDK clients from cfg.
func newClients(cfg aws.Config) (AutoScalingAPI, EC2API) {
	return autoscaling.NewFromConfig(cfg), ec2.NewFromConfig(cfg)
}
