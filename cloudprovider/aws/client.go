package aws

import (
	"context"
	"errors"
	"fmt"
	"net"

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
	GetInstanceTypesFromInstanceRequirements(ctx context.Context, in *ec2.GetInstanceTypesFromInstanceRequirementsInput, opts ...func(*ec2.Options)) (*ec2.GetInstanceTypesFromInstanceRequirementsOutput, error)
	DescribeImages(ctx context.Context, in *ec2.DescribeImagesInput, opts ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error)
	DescribeLaunchTemplates(ctx context.Context, in *ec2.DescribeLaunchTemplatesInput, opts ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error)
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

// newClients builds the SDK clients from cfg.
func newClients(cfg aws.Config) (AutoScalingAPI, EC2API) {
	return autoscaling.NewFromConfig(cfg), ec2.NewFromConfig(cfg)
}
