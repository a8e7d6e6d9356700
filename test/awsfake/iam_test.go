package awsfake

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/google/go-cmp/cmp"
)

// TestDeniedCallsAnswerAsEachServiceDoes: a refused Auto Scaling call is a
// 403 AccessDenied, a refused EC2 call a 403 UnauthorizedOperation in EC2's
// <Response><Errors> envelope, both naming the IAM action; the SDK reads
// each as an API error with that code.
func TestDeniedCallsAnswerAsEachServiceDoes(t *testing.T) {
	s := startFake(t)
	s.AddSubnet("subnet-a", "us-east-1a")
	c := sdkClients(t, s, noRetries)
	s.Deny("DescribeSubnets", "DescribeAutoScalingGroups")

	_, err := c.ec2.DescribeSubnets(t.Context(), &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-a"}})
	if code := apiErrorCode(err); code != "UnauthorizedOperation" || !strings.Contains(err.Error(), "ec2:DescribeSubnets") {
		t.Errorf("denied DescribeSubnets: %v (code %q), want UnauthorizedOperation naming ec2:DescribeSubnets", err, code)
	}
	if st := httpStatus(err); st != http.StatusForbidden {
		t.Errorf("denied DescribeSubnets: HTTP %d, want 403", st)
	}
	_, err = c.asg.DescribeAutoScalingGroups(t.Context(), &autoscaling.DescribeAutoScalingGroupsInput{})
	if code := apiErrorCode(err); code != "AccessDenied" || !strings.Contains(err.Error(), "autoscaling:DescribeAutoScalingGroups") {
		t.Errorf("denied DescribeAutoScalingGroups: %v (code %q), want AccessDenied naming the action", err, code)
	}
	if st := httpStatus(err); st != http.StatusForbidden {
		t.Errorf("denied DescribeAutoScalingGroups: HTTP %d, want 403", st)
	}

	auth := "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260101/" + s.region + "/ec2/aws4_request, SignedHeaders=host;x-amz-date, Signature=00"
	status, body := rawPost(t, s, auth, url.Values{"Action": {"DescribeSubnets"}, "Version": {versionEC2}})
	if status != http.StatusForbidden || !strings.Contains(body, "<Response><Errors><Error><Code>UnauthorizedOperation</Code>") ||
		!strings.Contains(body, "<RequestID>") {
		t.Errorf("raw denied EC2 answer: %d %s, want 403 with EC2's Response/Errors/Error envelope and a RequestID", status, body)
	}

	s.Deny()
	if _, err := c.ec2.DescribeSubnets(t.Context(), &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-a"}}); err != nil {
		t.Errorf("DescribeSubnets after Deny(): %v", err)
	}
}

// TestAllowOnlyRefusesWhatAPolicyLacks: AllowOnly takes an IAM policy's
// action list and refuses every other action the fake serves.
func TestAllowOnlyRefusesWhatAPolicyLacks(t *testing.T) {
	s := startFake(t)
	c := sdkClients(t, s, noRetries)
	refused := s.AllowOnly("autoscaling:DescribeAutoScalingGroups", "autoscaling:DescribeScalingActivities",
		"autoscaling:DescribeLaunchConfigurations", "autoscaling:DescribeAutoScalingInstances", "autoscaling:SetDesiredCapacity",
		"autoscaling:TerminateInstanceInAutoScalingGroup", "ec2:DescribeInstanceTypes", "ec2:DescribeLaunchTemplateVersions",
		"ec2:DescribeImages", "eks:DescribeNodegroup")
	// (this list lacks ec2:GetInstanceTypesFromInstanceRequirements, which
	// upstream's policy has)
	if d := cmp.Diff([]string{"CreateLaunchTemplateVersion", "DescribeCapacityReservations", "DescribeInstances", "DescribeLaunchTemplates", "DescribeSpotPriceHistory",
		"DescribeSubnets", "GetInstanceTypesFromInstanceRequirements", "ModifyLaunchTemplate", "SetInstanceProtection"}, refused); d != "" {
		t.Errorf("refused actions (-want +got):\n%s", d)
	}
	if _, err := c.ec2.DescribeSubnets(t.Context(), &ec2.DescribeSubnetsInput{}); apiErrorCode(err) != "UnauthorizedOperation" {
		t.Errorf("DescribeSubnets: %v, want UnauthorizedOperation", err)
	}
	if _, err := c.ec2.DescribeInstanceTypes(t.Context(), &ec2.DescribeInstanceTypesInput{}); err != nil {
		t.Errorf("DescribeInstanceTypes (allowed): %v", err)
	}
	_, err := c.asg.SetInstanceProtection(t.Context(), &autoscaling.SetInstanceProtectionInput{AutoScalingGroupName: aws.String("g"),
		InstanceIds: []string{"i-1"}, ProtectedFromScaleIn: aws.Bool(true)})
	if apiErrorCode(err) != "AccessDenied" {
		t.Errorf("SetInstanceProtection: %v, want AccessDenied", err)
	}
}

// httpStatus is the HTTP status of an SDK error (0 when it has none).
func httpStatus(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}
