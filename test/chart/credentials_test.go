package chart_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	framework "k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// credentialsFake stands in for what EKS gives a pod: STS (IRSA's
// AssumeRoleWithWebIdentity) and the EKS Pod Identity agent, and for Auto
// Scaling, whose calls it records by the access key that signed them.
type credentialsFake struct {
	mu        sync.Mutex
	stsForms  []url.Values // AssumeRoleWithWebIdentity requests
	agentAuth []string     // the agent's Authorization headers
	signedBy  []string     // access key ids of the Auto Scaling calls
	other     []string     // anything else, for the failure message
}

var credentialRe = regexp.MustCompile(`Credential=([A-Z0-9]+)/`)

func (f *credentialsFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	form, _ := url.ParseQuery(string(body))
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.URL.Path == "/v1/credentials":
		f.agentAuth = append(f.agentAuth, r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"AccessKeyId":"ASIAPODIDENTITY","SecretAccessKey":"secret","Token":"session","AccountId":"111122223333","Expiration":"2099-01-01T00:00:00Z"}`)
	case form.Get("Action") == "AssumeRoleWithWebIdentity":
		f.stsForms = append(f.stsForms, form)
		w.Header().Set("Content-Type", "text/xml")
		fmt.Fprint(w, `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleWithWebIdentityResult>`+
			`<Credentials><AccessKeyId>ASIAIRSA</AccessKeyId><SecretAccessKey>secret</SecretAccessKey><SessionToken>session</SessionToken>`+
			`<Expiration>2099-01-01T00:00:00Z</Expiration></Credentials>`+
			`<AssumedRoleUser><Arn>arn:aws:sts::111122223333:assumed-role/ca/s</Arn><AssumedRoleId>AROAEXAMPLE:s</AssumedRoleId></AssumedRoleUser>`+
			`</AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>`)
	case form.Get("Action") == "DescribeAutoScalingGroups":
		if m := credentialRe.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
			f.signedBy = append(f.signedBy, m[1])
		}
		w.Header().Set("Content-Type", "text/xml")
		fmt.Fprint(w, `<DescribeAutoScalingGroupsResponse xmlns="http://autoscaling.amazonaws.com/doc/2011-01-01/">`+
			`<DescribeAutoScalingGroupsResult><AutoScalingGroups/></DescribeAutoScalingGroupsResult></DescribeAutoScalingGroupsResponse>`)
	default:
		f.other = append(f.other, r.Method+" "+r.URL.String()+" "+r.Header.Get("Content-Type")+" "+string(body))
		http.Error(w, "not served", http.StatusNotImplemented)
	}
}

// TestChartsAWSDeploymentTakesTheRoleFromIRSAAndPodIdentity runs the binary
// with the arguments and region of the chart's AWS Deployment (the
// upstream-style values file with IRSA) plus what EKS adds to
// a pod for each way of giving it a role: IRSA's AWS_ROLE_ARN and
// AWS_WEB_IDENTITY_TOKEN_FILE, or EKS Pod Identity's
// AWS_CONTAINER_CREDENTIALS_FULL_URI and AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE.
// The provider's default SDK configuration must exchange the token for the
// role's credentials and sign its Auto Scaling calls with them, with no
// setting of its own.
func TestChartsAWSDeploymentTakesTheRoleFromIRSAAndPodIdentity(t *testing.T) {
	values, err := os.ReadFile(awsIRSAValuesFile)
	if err != nil {
		t.Fatal(err)
	}
	env := framework.New(t)
	m := render(t, "ca", env.Namespace, string(values))
	_, c := m.deployment(t)
	region, _ := envOf(c, "AWS_REGION")
	if region == "" {
		t.Fatal("the Deployment sets no AWS_REGION")
	}
	for name, tc := range map[string]struct {
		env     func(dir, fakeURL string) []string
		wantKey string
		check   func(t *testing.T, f *credentialsFake)
	}{
		"IRSA": {
			env: func(dir, fakeURL string) []string {
				return []string{"AWS_ROLE_ARN=arn:aws:iam::111122223333:role/ca",
					"AWS_WEB_IDENTITY_TOKEN_FILE=" + filepath.Join(dir, "token"), "AWS_ENDPOINT_URL_STS=" + fakeURL}
			},
			wantKey: "ASIAIRSA",
			check: func(t *testing.T, f *credentialsFake) {
				if len(f.stsForms) == 0 || f.stsForms[0].Get("WebIdentityToken") != "projected-token" ||
					f.stsForms[0].Get("RoleArn") != "arn:aws:iam::111122223333:role/ca" {
					t.Errorf("AssumeRoleWithWebIdentity requests %v: want the token file's token and the role", f.stsForms)
				}
			},
		},
		"EKS Pod Identity": {
			env: func(dir, fakeURL string) []string {
				return []string{"AWS_CONTAINER_CREDENTIALS_FULL_URI=" + fakeURL + "/v1/credentials",
					"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=" + filepath.Join(dir, "token")}
			},
			wantKey: "ASIAPODIDENTITY",
			check: func(t *testing.T, f *credentialsFake) {
				if len(f.agentAuth) == 0 || f.agentAuth[0] != "projected-token" {
					t.Errorf("agent Authorization headers %q: want the token file's token", f.agentAuth)
				}
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			fake := &credentialsFake{}
			srv := httptest.NewServer(fake)
			t.Cleanup(srv.Close)
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "token"), []byte("projected-token"), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(env.Context(), 90*time.Second)
			defer cancel()
			// The chart's arguments (aws, discovery, groups, the release's namespace), run outside a pod.
			args := append(append([]string(nil), c.Args...), "--kubeconfig="+env.Kubeconfig,
				"--scan-interval=1s", "--leader-elect=false", "--address="+framework.FreeAddress(t))
			cmd := exec.CommandContext(ctx, autoscalerBinary, args...)
			// Only what the pod would have: no key, no shared config, no instance metadata.
			cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "AWS_REGION=" + region,
				"AWS_ENDPOINT_URL_AUTO_SCALING=" + srv.URL, "AWS_ENDPOINT_URL_EC2=" + srv.URL,
				"AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE=" + filepath.Join(dir, "none"),
				"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "none")}, tc.env(dir, srv.URL)...)
			log := &framework.SyncBuffer{}
			cmd.Stdout, cmd.Stderr = log, log
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			defer func() { cancel(); <-done }()

			signed := func() []string {
				fake.mu.Lock()
				defer fake.mu.Unlock()
				return append([]string(nil), fake.signedBy...)
			}
			for len(signed()) == 0 && ctx.Err() == nil {
				select {
				case <-done:
					t.Fatalf("the autoscaler exited before calling Auto Scaling:\n%s", log.String())
				case <-time.After(200 * time.Millisecond):
				}
			}
			fake.mu.Lock()
			defer fake.mu.Unlock()
			if len(fake.signedBy) == 0 || fake.signedBy[0] != tc.wantKey {
				t.Errorf("Auto Scaling calls signed by %v, want %s (other requests %q)\n%s", fake.signedBy, tc.wantKey, fake.other, log.String())
			}
			tc.check(t, fake)
		})
	}
}
