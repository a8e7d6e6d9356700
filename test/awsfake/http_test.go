package awsfake

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// rawPost posts a query-protocol form with the given Authorization header
// (none when empty) and returns the status and body.
func rawPost(t *testing.T, s *Server, auth string, form url.Values) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.URL(), strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

func TestRequestsAreRefusedAsAWSDoes(t *testing.T) {
	s := startFake(t)
	sig := func(region, svc string) string {
		return "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260101/" + region + "/" + svc + "/aws4_request, SignedHeaders=host;x-amz-date, Signature=00"
	}
	asgForm := url.Values{"Action": {"DescribeAutoScalingGroups"}, "Version": {versionAutoScaling}}
	ec2Form := url.Values{"Action": {"DescribeSubnets"}, "Version": {versionEC2}}
	tests := []struct {
		name       string
		auth       string
		form       url.Values
		wantStatus int
		wantInBody []string
	}{
		{name: "no signature (Auto Scaling)", form: asgForm, wantStatus: 403,
			wantInBody: []string{"<ErrorResponse", "<Type>Sender</Type>", "<Code>MissingAuthenticationToken</Code>", "<RequestId>"}},
		{name: "no signature (EC2)", form: ec2Form, wantStatus: 403,
			wantInBody: []string{"<Response><Errors><Error><Code>MissingAuthenticationToken</Code>", "<RequestID>"}},
		{name: "not SigV4", auth: "AWS AKID:sig", form: asgForm, wantStatus: 400, wantInBody: []string{"<Code>IncompleteSignature</Code>"}},
		{name: "no signature part", auth: "AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/autoscaling/aws4_request", form: asgForm,
			wantStatus: 400, wantInBody: []string{"<Code>IncompleteSignature</Code>"}},
		{name: "wrong region", auth: sig("eu-west-1", "autoscaling"), form: asgForm, wantStatus: 403,
			wantInBody: []string{"<Code>SignatureDoesNotMatch</Code>", "eu-west-1"}},
		{name: "wrong service", auth: sig("us-east-1", "autoscaling"), form: ec2Form, wantStatus: 403,
			wantInBody: []string{"<Code>SignatureDoesNotMatch</Code>"}},
		{name: "unknown action", auth: sig("us-east-1", "autoscaling"), form: url.Values{"Action": {"LaunchRockets"}, "Version": {versionAutoScaling}},
			wantStatus: 400, wantInBody: []string{"<Code>InvalidAction</Code>"}},
		{name: "unknown EC2 action", auth: sig("us-east-1", "ec2"), form: url.Values{"Action": {"RunInstances"}, "Version": {versionEC2}},
			wantStatus: 400, wantInBody: []string{"<Response><Errors><Error><Code>InvalidAction</Code>"}},
		{name: "signed, accepted", auth: sig("us-east-1", "autoscaling"), form: asgForm, wantStatus: 200,
			wantInBody: []string{"<DescribeAutoScalingGroupsResponse xmlns=\"" + xmlnsAutoScaling + "\"><DescribeAutoScalingGroupsResult>"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body := rawPost(t, s, tc.auth, tc.form)
			if status != tc.wantStatus {
				t.Errorf("status %d, want %d; body %s", status, tc.wantStatus, body)
			}
			for _, w := range tc.wantInBody {
				if !strings.Contains(body, w) {
					t.Errorf("body %s does not contain %s", body, w)
				}
			}
		})
	}
	if got := s.Calls()["DescribeSubnets"]; got != 0 {
		t.Errorf("refused requests counted as calls: %d", got)
	}

	// The SDK without credentials (no signature) and signing for another
	// region are refused too, with API errors it parses.
	anon := sdkClients(t, s, config.WithCredentialsProvider(aws.AnonymousCredentials{}), noRetries)
	if _, err := anon.ec2.DescribeSubnets(t.Context(), &ec2.DescribeSubnetsInput{}); apiErrorCode(err) != "MissingAuthenticationToken" {
		t.Errorf("SDK without credentials: %v, want MissingAuthenticationToken", err)
	}
	c := sdkClients(t, s, config.WithRegion("eu-west-1"), noRetries)
	_, err := c.asg.DescribeAutoScalingGroups(t.Context(), &autoscaling.DescribeAutoScalingGroupsInput{})
	if apiErrorCode(err) != "SignatureDoesNotMatch" {
		t.Errorf("SDK in another region: %v, want SignatureDoesNotMatch", err)
	}
}

func TestThrottlingUsesTheSDKsThrottleCodes(t *testing.T) {
	s := startFake(t)
	s.AddGroup(Group{Name: "g", Max: 1})
	s.AddSubnet("subnet-1", "us-east-1a")
	c := sdkClients(t, s, noRetries)
	s.SetThrottle(100)
	throttles := retry.IsErrorThrottles(retry.DefaultThrottles)
	_, asgErr := c.asg.DescribeAutoScalingGroups(t.Context(), &autoscaling.DescribeAutoScalingGroupsInput{})
	_, ec2Err := c.ec2.DescribeSubnets(t.Context(), &ec2.DescribeSubnetsInput{})
	for _, tc := range []struct {
		name, want string
		err        error
	}{{"Auto Scaling", "Throttling", asgErr}, {"EC2", "RequestLimitExceeded", ec2Err}} {
		if apiErrorCode(tc.err) != tc.want {
			t.Errorf("%s: %v, want %s", tc.name, tc.err, tc.want)
		}
		if throttles.IsErrorThrottle(tc.err) != aws.TrueTernary {
			t.Errorf("%s: the SDK's retryer does not see %v as throttling", tc.name, tc.err)
		}
	}

	// At 30% the SDK's own retries absorb every throttle.
	s.SetThrottle(30)
	c = sdkClients(t, s, config.WithRetryer(func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = 10
			o.Backoff = retry.NewExponentialJitterBackoff(20 * time.Millisecond)
		})
	}))
	calls0, throttled0 := s.Calls()["DescribeAutoScalingGroups"], s.Throttled()
	for i := range 20 {
		if _, err := c.asg.DescribeAutoScalingGroups(t.Context(), &autoscaling.DescribeAutoScalingGroupsInput{}); err != nil {
			t.Fatalf("call %d at 30%% throttling: %v", i, err)
		}
	}
	calls, throttled := s.Calls()["DescribeAutoScalingGroups"]-calls0, s.Throttled()-throttled0
	if throttled < 5 || calls != 20+throttled {
		t.Errorf("%d calls with %d throttled: want 20 successes plus the throttled ones (about 30%%)", calls, throttled)
	}
}
