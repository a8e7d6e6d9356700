package awsfake

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"
)

// clients are SDK clients pointed at a fake.
type clients struct {
	asg *autoscaling.Client
	ec2 *ec2.Client
}

// startFake starts a fake and stops it when the test ends.
func startFake(t *testing.T, opts ...Option) *Server {
	t.Helper()
	s := New(opts...)
	if err := s.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// sdkClients builds SDK clients the standard way: the fake's environment
// (endpoint variables, region, credentials) and config.LoadDefaultConfig.
// Extra load options (e.g. the retryer) come after the environment.
func sdkClients(t *testing.T, s *Server, opts ...func(*config.LoadOptions) error) clients {
	t.Helper()
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	cfg, err := config.LoadDefaultConfig(t.Context(), opts...)
	if err != nil {
		t.Fatalf("LoadDefaultConfig: %v", err)
	}
	return clients{asg: autoscaling.NewFromConfig(cfg), ec2: ec2.NewFromConfig(cfg)}
}

// noRetries makes the SDK try each call once.
func noRetries(o *config.LoadOptions) error {
	o.RetryMaxAttempts = 1
	return nil
}

// apiErrorCode returns the AWS error code of an SDK error ("" when it is not
// an API error).
func apiErrorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// eventually polls cond until it holds or a generous deadline passes.
func eventually(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var lastErr error
	for {
		ok, err := cond()
		if ok {
			return
		}
		lastErr = err
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s (last error: %v)", what, lastErr)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// describeGroup describes one group through the SDK.
func describeGroup(t *testing.T, c clients, name string) *autoscalingGroup {
	t.Helper()
	out, err := c.asg.DescribeAutoScalingGroups(t.Context(), &autoscaling.DescribeAutoScalingGroupsInput{
		AutoScalingGroupNames: []string{name},
	})
	if err != nil {
		t.Fatalf("DescribeAutoScalingGroups(%s): %v", name, err)
	}
	if len(out.AutoScalingGroups) != 1 {
		t.Fatalf("DescribeAutoScalingGroups(%s): %d groups, want 1", name, len(out.AutoScalingGroups))
	}
	g := out.AutoScalingGroups[0]
	res := &autoscalingGroup{
		name: aws.ToString(g.AutoScalingGroupName), min: aws.ToInt32(g.MinSize), max: aws.ToInt32(g.MaxSize),
		desired: aws.ToInt32(g.DesiredCapacity), states: map[string]string{},
	}
	for _, in := range g.Instances {
		res.states[aws.ToString(in.InstanceId)] = string(in.LifecycleState)
	}
	return res
}

// autoscalingGroup is the part of a described group the tests compare.
type autoscalingGroup struct {
	name              string
	min, max, desired int32
	states            map[string]string // instance ID -> lifecycle state
}
