package chart_test

import (
	"context"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/kwok"
	framework "k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// upstreamAWSValues is upstream's values file as most AWS installations
// write it: no cloudProvider line (upstream's default, aws, applies), one
// Auto Scaling group and the region.
func upstreamAWSValues(t *testing.T, group string) string {
	t.Helper()
	v := upstreamValues(t, "aws")
	for old, repl := range map[string]string{
		"\ncloudProvider: aws\n":    "\n",
		"\nautoscalingGroups: []\n": "\nautoscalingGroups: [{name: " + group + ", minSize: 1, maxSize: 10}]\n",
		"\nawsRegion: \"\"\n":       "\nawsRegion: eu-west-1\n",
	} {
		if strings.Count(v, old) != 1 {
			t.Fatalf("%s: want one line %q", upstreamValuesFile, strings.TrimSpace(old))
		}
		v = strings.Replace(v, old, repl, 1)
	}
	return v
}

// TestUpstreamAWSValuesWithoutCloudProvider: upstream's values file with
// only autoscalingGroups and awsRegion set and no cloudProvider line (the
// most common AWS values file) renders the aws provider, as upstream's
// chart does: never the kwok provider, which would create fake Nodes. Until
// this chart's default was aws it rendered --cloud-provider=kwok
// --nodes=1:10:my-asg.
func TestUpstreamAWSValuesWithoutCloudProvider(t *testing.T) {
	m := render(t, release, namespace, upstreamAWSValues(t, "my-asg"))
	_, c := m.deploymentNamed(t, release+"-aws-cluster-autoscaler")
	for _, want := range []string{"--cloud-provider=aws", "--nodes=1:10:my-asg"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %q lack %s", c.Args, want)
		}
	}
	if v, _ := envOf(c, "AWS_REGION"); v != "eu-west-1" {
		t.Errorf("AWS_REGION = %q, want eu-west-1", v)
	}
	checkArgsParse(t, c.Args)
	if slices.ContainsFunc(m.all("ConfigMap"), func(o *unstructured.Unstructured) bool { return o.GetName() == kwok.ConfigMapName }) {
		t.Errorf("%s rendered with the aws provider", kwok.ConfigMapName)
	}
	cluster, _ := m.rbac(t)
	if allows(cluster, permission{resource: "nodes", verb: "create"}) {
		t.Error("the aws release may create Nodes")
	}
}

// TestKwokForcedOnAWSValuesRefusesToStart: the same values with
// cloudProvider kwok forced (what this chart rendered by default before),
// run with the rendered arguments against the real control plane, where
// nothing opted the cluster in: the binary exits 1 at start-up with an
// error naming the opt-ins, and no Node of the group exists.
func TestKwokForcedOnAWSValuesRefusesToStart(t *testing.T) {
	env := framework.New(t)
	group := framework.UniqueName("my-asg")
	rel := framework.UniqueName("ca")
	m := render(t, rel, env.Namespace, upstreamAWSValues(t, group)+"cloudProvider: kwok\n")
	_, c := m.deployment(t)
	if !slices.Contains(c.Args, "--nodes=1:10:"+group) || !slices.Contains(c.Args, "--cloud-provider=kwok") {
		t.Fatalf("args %q: not the kwok provider with the AWS group", c.Args)
	}
	// Nodes the provider would make for the group (a started provider makes
	// them for pending pods, and with this flag for the group's minimum).
	selector := metav1.ListOptions{LabelSelector: apiv1.LabelInstanceTypeStable + "=" + group}
	t.Cleanup(func() {
		nodes, _ := env.Client.CoreV1().Nodes().List(context.Background(), selector)
		for _, n := range nodes.Items {
			_ = env.Client.CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{})
		}
	})
	ctx, cancel := context.WithTimeout(env.Context(), 60*time.Second)
	defer cancel()
	args := append(slices.Clone(c.Args), "--kubeconfig="+env.Kubeconfig, "--address="+framework.FreeAddress(t),
		"--enforce-node-group-min-size=true")
	out, err := exec.CommandContext(ctx, autoscalerBinary, args...).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || ctx.Err() != nil {
		t.Errorf("err %v (context %v), want exit code 1 at start-up", err, ctx.Err())
	}
	for _, want := range []string{"the kwok provider was not enabled for this cluster",
		env.Namespace + "/" + kwok.ConfigMapName, kwok.EnabledFlag} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output does not say %q:\n%s", want, out)
		}
	}
	nodes, err := env.Client.CoreV1().Nodes().List(env.Context(), selector)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 0 {
		t.Errorf("%d Nodes of group %s created, want none", len(nodes.Items), group)
	}
}
