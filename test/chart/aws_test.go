package chart_test

import (
	"slices"
	"strings"
	"testing"

	apiv1 "k8s.io/api/core/v1"
)

// envOf returns the container's variable name, as value or secret name/key.
func envOf(c apiv1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name != name {
			continue
		}
		if r := e.ValueFrom; r != nil && r.SecretKeyRef != nil {
			return "secret:" + r.SecretKeyRef.Name + "/" + r.SecretKeyRef.Key, true
		}
		return e.Value, true
	}
	return "", false
}

// cloudProvider: aws takes upstream's values: awsRegion as AWS_REGION,
// autoDiscovery.clusterName and autoDiscovery.tags as the asg:tag=
// discoverer, the access key as a Secret, IRSA through the service
// account's annotations; autoscalingGroups as --nodes.
func TestAWSValues(t *testing.T) {
	const full = "rel-aws-cluster-autoscaler"
	m := render(t, release, namespace, `
cloudProvider: aws
awsRegion: eu-west-1
awsAccessKeyID: AKIAEXAMPLE
awsSecretAccessKey: secret
autoDiscovery: {clusterName: prod}
autoscalingGroups: [{name: gpu-asg, minSize: 0, maxSize: 4}]
rbac:
  serviceAccount:
    annotations: {eks.amazonaws.com/role-arn: "arn:aws:iam::111122223333:role/cluster-autoscaler"}
`)
	_, c := m.deploymentNamed(t, full)
	checkArgsParse(t, c.Args)
	for _, want := range []string{"--cloud-provider=aws", "--nodes=0:4:gpu-asg",
		"--node-group-auto-discovery=asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/prod"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %v lack %s", c.Args, want)
		}
	}
	for name, want := range map[string]string{"AWS_REGION": "eu-west-1",
		"AWS_ACCESS_KEY_ID": "secret:" + full + "-aws/AwsAccessKeyId", "AWS_SECRET_ACCESS_KEY": "secret:" + full + "-aws/AwsSecretAccessKey"} {
		if got, _ := envOf(c, name); got != want {
			t.Errorf("env %s = %q, want %q", name, got, want)
		}
	}
	var secret apiv1.Secret
	m.one(t, "Secret", &secret)
	if secret.Name != full+"-aws" || string(secret.Data["AwsAccessKeyId"]) != "AKIAEXAMPLE" || string(secret.Data["AwsSecretAccessKey"]) != "secret" {
		t.Errorf("secret %s with keys %v", secret.Name, secret.Data)
	}
	var sa apiv1.ServiceAccount
	m.one(t, "ServiceAccount", &sa)
	if sa.Annotations["eks.amazonaws.com/role-arn"] == "" {
		t.Errorf("service account annotations %v: no IRSA role", sa.Annotations)
	}

	// Defaults: no region (the SDK finds it), no key (the credential chain),
	// no auto-discovery without a cluster name.
	m = render(t, release, namespace, "cloudProvider: aws\nautoscalingGroups: [{name: a, minSize: 1, maxSize: 3}]\n")
	_, c = m.deploymentNamed(t, full)
	for _, name := range []string{"AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
		if v, ok := envOf(c, name); ok {
			t.Errorf("env %s = %q by default", name, v)
		}
	}
	if len(m.all("Secret")) != 0 || slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--node-group-auto-discovery") }) {
		t.Errorf("a Secret or auto-discovery by default: args %v", c.Args)
	}

	// secretKeyRefNameOverride: an existing Secret, none rendered.
	m = render(t, release, namespace, "cloudProvider: aws\nsecretKeyRefNameOverride: mine\nautoDiscovery: {clusterName: c, tags: [team=ml]}\n")
	_, c = m.deploymentNamed(t, full)
	if got, _ := envOf(c, "AWS_ACCESS_KEY_ID"); got != "secret:mine/AwsAccessKeyId" || len(m.all("Secret")) != 0 {
		t.Errorf("AWS_ACCESS_KEY_ID %q with %d Secrets rendered", got, len(m.all("Secret")))
	}
	if !slices.Contains(c.Args, "--node-group-auto-discovery=asg:tag=team=ml") {
		t.Errorf("args %v: custom tags not rendered", c.Args)
	}

	for name, tc := range map[string]struct{ values, want string }{
		"key without secret":   {"cloudProvider: aws\nawsAccessKeyID: AKIA\n", "awsAccessKeyID and awsSecretAccessKey go together"},
		"clusterapi keys":      {"cloudProvider: aws\nautoDiscovery: {namespace: x}\n", "autoDiscovery.namespace and autoDiscovery.labels are used only"},
		"secret name for kwok": {"cloudProvider: kwok\nsecretKeyRefNameOverride: mine\n", "of those cloud providers this build has only aws"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := helmTemplate(t, release, namespace, tc.values)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one containing %q", err, tc.want)
			}
		})
	}
}
