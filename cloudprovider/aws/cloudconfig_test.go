package aws

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

func TestParseCloudConfig(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		want       cloudConfig
		wantErr    string
	}{{
		name: "upstream's form",
		file: `; the legacy cloud provider's file
[Global]
Zone = us-east-1a
KubernetesClusterTag = prod

[ServiceOverride "1"]
Service = autoscaling
Region = us-east-1
URL = https://autoscaling.example.internal   ; a VPC endpoint
SigningRegion = us-east-1

[serviceoverride "2"]
service=ec2
region="us-east-1"
url = "https://ec2.example.internal"
signingregion = us-east-1
SigningMethod = v4
`,
		want: cloudConfig{Ignored: []string{"Zone", "KubernetesClusterTag"}, Overrides: []serviceOverride{
			{Name: "1", Service: "autoscaling", Region: "us-east-1", URL: "https://autoscaling.example.internal", SigningRegion: "us-east-1"},
			{Name: "2", Service: "ec2", Region: "us-east-1", URL: "https://ec2.example.internal", SigningRegion: "us-east-1", SigningMethod: "v4"},
		}},
	}, {
		name:    "SigningRegion missing",
		file:    "[ServiceOverride \"1\"]\nService = ec2\nRegion = us-east-1\nURL = https://x\n",
		wantErr: "SigningRegion is missing",
	}, {
		name: "two overrides of one service and region",
		file: "[ServiceOverride \"1\"]\nService = ec2\nRegion = r\nURL = u\nSigningRegion = r\n" +
			"[ServiceOverride \"2\"]\nService = EC2\nRegion = r\nURL = v\nSigningRegion = r\n",
		wantErr: "both override",
	}, {
		name:    "unknown section",
		file:    "[Endpoints]\nec2 = x\n",
		wantErr: "unknown section",
	}, {
		name:    "unknown override key",
		file:    "[ServiceOverride \"1\"]\nEndpoint = x\n",
		wantErr: "unknown key",
	}, {
		name:    "override without a name",
		file:    "[ServiceOverride]\nService = ec2\n",
		wantErr: "needs a name",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseCloudConfig(strings.NewReader(tc.file))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("parsed (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCloudConfigEndpointOverrides: with the SDK's own endpoint settings
// pointing nowhere, the --cloud-config overrides of the provider's region
// reach the fake, signed for their SigningRegion (the fake refuses another);
// an override of another region is not applied.
func TestCloudConfigEndpointOverrides(t *testing.T) {
	s := startFake(t) // answers for us-east-1
	s.AddGroup(groupOf("ng", 1))
	t.Setenv("AWS_ENDPOINT_URL_AUTO_SCALING", "http://127.0.0.1:1")
	t.Setenv("AWS_ENDPOINT_URL_EC2", "http://127.0.0.1:1")
	t.Setenv("AWS_MAX_ATTEMPTS", "1")
	t.Setenv("AWS_REGION", "us-west-2")
	write := func(region string) string {
		var b strings.Builder
		for i, svc := range []string{"autoscaling", "ec2"} {
			b.WriteString("[ServiceOverride \"" + string(rune('1'+i)) + "\"]\nService = " + svc + "\nRegion = " + region +
				"\nURL = " + s.URL() + "\nSigningRegion = us-east-1\n")
		}
		path := filepath.Join(t.TempDir(), "cloud.conf")
		if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	build := func(path string) cloudprovider.CloudProvider {
		p, err := Build(context.Background(), cloudprovider.BuildOptions{Options: cloudprovider.Options{
			CloudConfig: path, NodeGroups: []string{"0:3:ng"}}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := build(write("us-west-2"))
	if err := p.Refresh(context.Background()); err != nil {
		t.Fatalf("refresh through the overrides: %v", err)
	}
	ngs, _ := p.NodeGroups(context.Background())
	if len(ngs) != 1 {
		t.Fatalf("%d node groups through the overrides, want 1", len(ngs))
	}
	if _, err := ngs[0].TemplateNodeInfo(context.Background()); err != nil {
		t.Errorf("template through the EC2 override: %v", err)
	}
	if err := build(write("eu-west-1")).Refresh(context.Background()); err == nil {
		t.Error("an override of another region was applied")
	}
	if _, err := Build(context.Background(), cloudprovider.BuildOptions{Options: cloudprovider.Options{
		CloudConfig: filepath.Join(t.TempDir(), "missing.conf")}}); err == nil {
		t.Error("a missing --cloud-config file built a provider")
	}
}
