package awsfake

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/google/go-cmp/cmp"
)

// eksClient is an SDK EKS client pointed at the fake by AWS_ENDPOINT_URL_EKS
// (Server.Env), trying each call once.
func eksClient(t *testing.T, s *Server) *eks.Client {
	t.Helper()
	sdkClients(t, s) // sets the fake's environment
	cfg, err := config.LoadDefaultConfig(t.Context(), noRetries)
	if err != nil {
		t.Fatal(err)
	}
	return eks.NewFromConfig(cfg)
}

func describeNG(t *testing.T, c *eks.Client, cluster, name string) (*eks.DescribeNodegroupOutput, error) {
	t.Helper()
	return c.DescribeNodegroup(t.Context(), &eks.DescribeNodegroupInput{ClusterName: aws.String(cluster), NodegroupName: aws.String(name)})
}

// TestDescribeNodegroupThroughTheSDK: a registered managed node group is
// read back by the SDK's EKS client with its labels, taints (effects as
// EKS spells them), capacity type, Auto Scaling group and scaling config;
// the capacity type defaults to ON_DEMAND; each call is counted.
func TestDescribeNodegroupThroughTheSDK(t *testing.T) {
	s := startFake(t)
	s.AddGroup(Group{Name: "eks-gpu-1234", Min: 0, Max: 4, Desired: 0, Subnets: []string{"subnet-b", "subnet-a"},
		LaunchConfigurationName: "none"})
	s.AddNodegroup(EKSNodegroup{Cluster: "prod", Name: "gpu", CapacityType: "SPOT", AutoScalingGroups: []string{"eks-gpu-1234"},
		Labels: map[string]string{"team": "ml", "example.com/tier": "gold"},
		Taints: []EKSTaint{{Key: "dedicated", Value: "ml", Effect: "NO_SCHEDULE"}, {Key: "spot", Effect: "PREFER_NO_SCHEDULE"}}})
	s.AddNodegroup(EKSNodegroup{Cluster: "prod", Name: "plain"})
	c := eksClient(t, s)

	out, err := describeNG(t, c, "prod", "gpu")
	if err != nil {
		t.Fatal(err)
	}
	ng := out.Nodegroup
	if ng == nil {
		t.Fatal("no nodegroup in the answer")
	}
	if aws.ToString(ng.NodegroupName) != "gpu" || aws.ToString(ng.ClusterName) != "prod" || ng.Status != ekstypes.NodegroupStatusActive {
		t.Errorf("name %q cluster %q status %q", aws.ToString(ng.NodegroupName), aws.ToString(ng.ClusterName), ng.Status)
	}
	if ng.CapacityType != ekstypes.CapacityTypesSpot {
		t.Errorf("capacity type %q, want SPOT", ng.CapacityType)
	}
	if d := cmp.Diff(map[string]string{"team": "ml", "example.com/tier": "gold"}, ng.Labels); d != "" {
		t.Errorf("labels (-want +got):\n%s", d)
	}
	var taints []string
	for _, tn := range ng.Taints {
		taints = append(taints, aws.ToString(tn.Key)+"="+aws.ToString(tn.Value)+":"+string(tn.Effect))
	}
	if d := cmp.Diff([]string{"dedicated=ml:NO_SCHEDULE", "spot=:PREFER_NO_SCHEDULE"}, taints); d != "" {
		t.Errorf("taints (-want +got):\n%s", d)
	}
	if ng.Resources == nil || len(ng.Resources.AutoScalingGroups) != 1 || aws.ToString(ng.Resources.AutoScalingGroups[0].Name) != "eks-gpu-1234" {
		t.Errorf("resources %+v, want the Auto Scaling group eks-gpu-1234", ng.Resources)
	}
	if sc := ng.ScalingConfig; sc == nil || aws.ToInt32(sc.MaxSize) != 4 || aws.ToInt32(sc.DesiredSize) != 0 {
		t.Errorf("scaling config %+v, want the group's max 4, desired 0", sc)
	}
	if ng.CreatedAt == nil || ng.CreatedAt.IsZero() {
		t.Error("no createdAt")
	}

	out, err = describeNG(t, c, "prod", "plain")
	if err != nil {
		t.Fatal(err)
	}
	if out.Nodegroup.CapacityType != ekstypes.CapacityTypesOnDemand || len(out.Nodegroup.Labels) != 0 || len(out.Nodegroup.Taints) != 0 {
		t.Errorf("plain node group: capacity %q labels %v taints %v, want ON_DEMAND and none", out.Nodegroup.CapacityType,
			out.Nodegroup.Labels, out.Nodegroup.Taints)
	}
	if n := s.Calls()["DescribeNodegroup"]; n != 2 {
		t.Errorf("DescribeNodegroup counted %d times, want 2", n)
	}
}

// TestDescribeNodegroupErrors: an unknown node group or cluster is a 404
// ResourceNotFoundException (the SDK's typed error); a denied call a 403
// AccessDeniedException naming eks:DescribeNodegroup, by Deny and by an
// AllowOnly policy without it; a path the fake does not serve is refused.
func TestDescribeNodegroupErrors(t *testing.T) {
	s := startFake(t)
	s.AddNodegroup(EKSNodegroup{Cluster: "prod", Name: "workers"})
	c := eksClient(t, s)

	_, err := describeNG(t, c, "prod", "missing")
	var nf *ekstypes.ResourceNotFoundException
	if !errors.As(err, &nf) || httpStatus(err) != http.StatusNotFound || !strings.Contains(err.Error(), "No node group found for name: missing") {
		t.Errorf("unknown node group: %v (HTTP %d), want a 404 ResourceNotFoundException", err, httpStatus(err))
	}
	_, err = describeNG(t, c, "dev", "workers")
	if !errors.As(err, &nf) || !strings.Contains(err.Error(), "No cluster found for name: dev") {
		t.Errorf("unknown cluster: %v, want ResourceNotFoundException naming the cluster", err)
	}

	s.Deny("DescribeNodegroup")
	_, err = describeNG(t, c, "prod", "workers")
	if code := apiErrorCode(err); code != "AccessDeniedException" || httpStatus(err) != http.StatusForbidden ||
		!strings.Contains(err.Error(), "eks:DescribeNodegroup") {
		t.Errorf("denied: %v (code %q, HTTP %d), want a 403 AccessDeniedException naming eks:DescribeNodegroup", err, code, httpStatus(err))
	}
	s.Deny()
	if _, err := describeNG(t, c, "prod", "workers"); err != nil {
		t.Errorf("after Deny(): %v", err)
	}
	if refused := s.AllowOnly("autoscaling:DescribeAutoScalingGroups"); !slices.Contains(refused, "DescribeNodegroup") {
		t.Errorf("AllowOnly without eks:DescribeNodegroup refuses %v, want DescribeNodegroup among them", refused)
	}
	if _, err := describeNG(t, c, "prod", "workers"); apiErrorCode(err) != "AccessDeniedException" {
		t.Errorf("under a policy without eks:DescribeNodegroup: %v, want AccessDeniedException", err)
	}
	if refused := s.AllowOnly("eks:DescribeNodegroup"); slices.Contains(refused, "DescribeNodegroup") {
		t.Errorf("AllowOnly with eks:DescribeNodegroup still refuses it")
	}
	if _, err := describeNG(t, c, "prod", "workers"); err != nil {
		t.Errorf("under a policy with eks:DescribeNodegroup: %v", err)
	}

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, s.URL()+"/clusters/prod/addons", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("X-Amzn-ErrorType") != "UnknownOperationException" {
		t.Errorf("an unserved EKS path: %d %q, want 404 UnknownOperationException", resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"))
	}
	req, _ = http.NewRequestWithContext(t.Context(), http.MethodGet, s.URL()+"/clusters/prod/node-groups/workers", nil)
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Amzn-ErrorType") != "MissingAuthenticationToken" {
		t.Errorf("an unsigned DescribeNodegroup: %d %q, want 403 MissingAuthenticationToken", resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"))
	}
}
