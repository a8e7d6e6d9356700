package chart_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/externalgrpc"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// deploymentNamed decodes the rendered Deployment called name.
func (m manifest) deploymentNamed(t *testing.T, name string) (*appsv1.Deployment, apiv1.Container) {
	t.Helper()
	i := slices.IndexFunc(m.all("Deployment"), func(o *unstructured.Unstructured) bool { return o.GetName() == name })
	if i < 0 {
		t.Fatalf("no Deployment %s rendered (kinds: %v)", name, m.kinds())
	}
	d := &appsv1.Deployment{}
	convert(t, m.all("Deployment")[i], d)
	return d, d.Spec.Template.Spec.Containers[0]
}

// grpcConfig decodes the rendered --cloud-config of the external gRPC provider.
func (m manifest) grpcConfig(t *testing.T, name string) *externalgrpc.Config {
	t.Helper()
	for _, o := range m.all("ConfigMap") {
		if o.GetName() != name {
			continue
		}
		cm := &apiv1.ConfigMap{}
		convert(t, o, cm)
		cfg, err := externalgrpc.ParseConfig([]byte(cm.Data["cloud-config.yaml"]))
		if err != nil {
			t.Fatalf("the rendered cloud-config does not parse: %v\n%s", err, cm.Data["cloud-config.yaml"])
		}
		return cfg
	}
	t.Fatalf("no ConfigMap %s rendered", name)
	return nil
}

// cloudProvider: externalgrpc renders the provider's --cloud-config as a
// ConfigMap mounted where the argument points; the example server, when
// enabled, gets its own Deployment, Service and service account, and is the
// default address; mTLS files come from a Secret; no address is an error.
func TestExternalGRPCValues(t *testing.T) {
	const full = "rel-externalgrpc-cluster-autoscaler"
	m := render(t, release, namespace, `
cloudProvider: externalgrpc
externalGRPC:
  exampleServer: {enabled: true}
kwokProviderConfig:
  nodeGroups: [{name: g, maxSize: 2, template: {capacity: {cpu: "4", memory: 16Gi, pods: "110"}}}]
`)
	_, c := m.deploymentNamed(t, full)
	checkArgsParse(t, c.Args)
	if !slices.Contains(c.Args, "--cloud-provider=externalgrpc") ||
		!slices.Contains(c.Args, "--cloud-config=/etc/cluster-autoscaler/externalgrpc/cloud-config.yaml") {
		t.Errorf("args %v", c.Args)
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/etc/cluster-autoscaler/externalgrpc" {
		t.Errorf("volume mounts %+v", c.VolumeMounts)
	}
	cfg := m.grpcConfig(t, full+"-externalgrpc")
	if cfg.Address != full+"-kwokserver.kube-system.svc:8086" || cfg.Key != "" {
		t.Errorf("cloud-config %+v: want the example server's Service, plaintext", cfg)
	}
	d, s := m.deploymentNamed(t, full+"-kwokserver")
	if s.Image != "cluster-autoscaler:v0.1.0-dev" || s.Command[0] != "/kwokserver" ||
		d.Spec.Template.Spec.ServiceAccountName != full+"-kwokserver" {
		t.Errorf("example server: image %q, command %v, service account %q", s.Image, s.Command,
			d.Spec.Template.Spec.ServiceAccountName)
	}
	if !slices.ContainsFunc(m.all("ConfigMap"), func(o *unstructured.Unstructured) bool { return o.GetName() == "kwok-provider-config" }) {
		t.Error("the example server's kwok-provider-config is not rendered")
	}

	m = render(t, release, namespace, `
cloudProvider: externalgrpc
externalGRPC: {address: "provider.example:443", timeout: 9s, tlsSecret: provider-mtls}
`)
	cfg = m.grpcConfig(t, full+"-externalgrpc")
	if cfg.Address != "provider.example:443" || cfg.Timeout.Duration != 9*time.Second ||
		cfg.Key != "/etc/cluster-autoscaler/externalgrpc-tls/tls.key" || cfg.CACert != "/etc/cluster-autoscaler/externalgrpc-tls/ca.crt" {
		t.Errorf("cloud-config %+v", cfg)
	}
	d, c = m.deploymentNamed(t, full)
	if len(c.VolumeMounts) != 2 || len(d.Spec.Template.Spec.Volumes) != 2 ||
		d.Spec.Template.Spec.Volumes[1].Secret == nil || d.Spec.Template.Spec.Volumes[1].Secret.SecretName != "provider-mtls" {
		t.Errorf("mounts %+v, volumes %+v", c.VolumeMounts, d.Spec.Template.Spec.Volumes)
	}
	if len(m.all("Deployment")) != 1 {
		t.Error("the example server is rendered although not enabled")
	}

	if _, err := helmTemplate(t, release, namespace, "cloudProvider: externalgrpc\n"); err == nil ||
		!strings.Contains(err.Error(), "needs externalGRPC.address") {
		t.Errorf("no address: err %v, want the chart to say what is missing", err)
	}
}

// TestExternalGRPCExampleServerRunsWithTheChartsRBAC installs the chart with
// the example server on the control plane, runs the example server and the
// autoscaler with their rendered arguments, each as its own service account,
// and sees a pending pod get a node through the protocol.
func TestExternalGRPCExampleServerRunsWithTheChartsRBAC(t *testing.T) {
	pool := framework.UniqueName("pool")
	in := install(t, fmt.Sprintf(`
cloudProvider: externalgrpc
externalGRPC:
  exampleServer: {enabled: true}
extraArgs: {v: 2, scan-interval: 1s}
kwokProviderConfig:
  nodeGroups:
  - name: %[1]s
    maxSize: 2
    template:
      labels: {pool: %[1]s}
      capacity: {cpu: "4", memory: 16Gi, pods: "110"}
    faults: {registrationDelay: 1s}
`, pool))
	env, ns := in.env, in.env.Namespace
	t.Cleanup(func() { deleteNodes(env, pool) })
	var full string
	for _, o := range in.manifest.all("Deployment") {
		if !strings.HasSuffix(o.GetName(), "-kwokserver") {
			full = o.GetName()
		}
	}
	serverSA := full + "-kwokserver"

	root := repoRoot
	server := filepath.Join(t.TempDir(), "kwokserver")
	if err := framework.GoBuild(root, server, "./cloudprovider/externalgrpc/examples/kwokserver", false); err != nil {
		t.Fatal(err)
	}
	addr := framework.FreeAddress(t)
	_, sc := in.manifest.deploymentNamed(t, serverSA)
	asServer := *in
	asServer.serviceAccount = serverSA
	serverArgs := []string{"--kubeconfig=" + impersonatingKubeconfig(t, &asServer), "--address=" + addr}
	for _, a := range sc.Args {
		if !strings.HasPrefix(a, "--address=") {
			serverArgs = append(serverArgs, a)
		}
	}
	startProcess(t, "kwokserver", server, serverArgs...)

	// The autoscaler: its rendered args, the cloud-config pointed at the
	// loopback server (the Service's name does not resolve here).
	cfgPath := filepath.Join(t.TempDir(), "cloud-config.yaml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf("address: %q\n", addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, c := in.manifest.deploymentNamed(t, full)
	asAutoscaler := *in
	asAutoscaler.serviceAccount = full
	args := []string{"--kubeconfig=" + impersonatingKubeconfig(t, &asAutoscaler), "--address=" + framework.FreeAddress(t),
		"--explain-address="}
	for _, a := range c.Args {
		if !strings.HasPrefix(a, "--cloud-config=") {
			args = append(args, a)
		}
	}
	args = append(args, "--cloud-config="+cfgPath)
	log := startProcess(t, "cluster-autoscaler", autoscalerBinary, args...)

	pod := framework.MakePod(ns, "needs-a-node").Req("1", "1Gi").NodeSelector("pool", pool).Obj()
	if _, err := env.Client.CoreV1().Pods(ns).Create(env.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.Eventually(60*time.Second, "a node of the group registers through the example server", func(ctx context.Context) (bool, error) {
		nodes, err := env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "pool=" + pool})
		return err == nil && len(nodes.Items) == 1, nil
	})
	for _, line := range strings.Split(log.String(), "\n") {
		if strings.Contains(strings.ToLower(line), "forbidden") {
			t.Errorf("a request was refused: %s", line)
		}
	}
}

// startProcess runs a binary until the test ends and returns its log.
func startProcess(t *testing.T, name, binary string, args ...string) *framework.SyncBuffer {
	t.Helper()
	log := &framework.SyncBuffer{}
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%s log:\n%s", name, log.String())
		}
	})
	return log
}
