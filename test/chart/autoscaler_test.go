package chart_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/kwok"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	v1 "k8s.io/autoscaler/cluster-autoscaler/provreq/apis/autoscaling.x-k8s.io/v1"
	"k8s.io/autoscaler/cluster-autoscaler/provreq/client"
	framework "k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// TestAutoscalerRunsWithTheChartsRBAC runs the real binary with the
// Deployment's rendered arguments, as the chart's service account, with the
// chart's kwok provider ConfigMap: it takes the Lease, writes the status
// ConfigMap, scales up for a pending pod (the kwok provider creates a Node and
// records the pending instance in its state ConfigMap), records events,
// fails and garbage-collects a ProvisioningRequest, serves /explainz on its
// own listener and not on the Service's port, and on SIGTERM deletes the
// status ConfigMap and exits 0, without a single request refused for lack of
// permission.
func TestAutoscalerRunsWithTheChartsRBAC(t *testing.T) {
	addrs := framework.FreeAddresses(t, 2) // chosen together, so that they differ
	addr, explainAddr := addrs[0], addrs[1]
	// The group's nodes carry pool=<unique name>, by which they are deleted
	// at the end (the namespace, and so the framework's cleanup label, is
	// not known before install renders the chart).
	pool := framework.UniqueName("pool")
	in := install(t, fmt.Sprintf(`
cloudProvider: kwok
extraArgs:
  v: 2
  address: %q
  explain-address: %q
  scan-interval: 1s
  max-node-provision-time: 1m
  enable-provisioning-requests: true
  provisioning-request-retention-time: 1s
kwokProviderConfig:
  nodeGroups:
  - name: %s
    minSize: 0
    maxSize: 2
    template:
      labels: {pool: %s}
      capacity: {cpu: "4", memory: 16Gi, pods: "110"}
    faults: {registrationDelay: 2s}
`, addr, explainAddr, pool, pool))
	env, ns := in.env, in.env.Namespace
	ctx := env.Context()
	t.Cleanup(func() { deleteNodes(env, pool) })

	_, c := in.manifest.deployment(t)
	args := append(c.Args, "--kubeconfig="+impersonatingKubeconfig(t, in))
	var log framework.SyncBuffer
	cmd := exec.Command(autoscalerBinary, args...)
	cmd.Stdout, cmd.Stderr = &log, &log
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
			t.Logf("cluster-autoscaler log:\n%s", log.String())
		}
	})

	env.Eventually(30*time.Second, "the autoscaler holds the Lease and reports Running", func(ctx context.Context) (bool, error) {
		if _, err := env.Client.CoordinationV1().Leases(ns).Get(ctx, "cluster-autoscaler", metav1.GetOptions{}); err != nil {
			return false, nil
		}
		cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "cluster-autoscaler-status", metav1.GetOptions{})
		return err == nil && strings.Contains(cm.Data[clusterstate.StatusDataKey], "autoscalerStatus: "+clusterstate.AutoscalerRunning), nil
	})

	pod := framework.MakePod(ns, "needs-a-node").Req("1", "1Gi").NodeSelector("pool", pool).Obj()
	if _, err := env.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.Eventually(30*time.Second, "the kwok provider records the pending instance", func(ctx context.Context) (bool, error) {
		_, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, kwok.StateConfigMap, metav1.GetOptions{})
		return err == nil, nil
	})
	env.Eventually(30*time.Second, "a node of the group registers", func(ctx context.Context) (bool, error) {
		nodes, err := env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "pool=" + pool})
		return err == nil && len(nodes.Items) == 1, nil
	})
	env.Eventually(10*time.Second, "the pod gets a TriggeredScaleUp event", func(ctx context.Context) (bool, error) {
		evs, err := env.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=TriggeredScaleUp"})
		return err == nil && len(evs.Items) > 0, nil
	})

	// The explainer answers on its own listener (the pod may be pending
	// still, or scheduled: 200, or its 404 that says so); the port the
	// Service exposes does not serve the path.
	const noSuchPath = "404 page not found\n"
	if code, body := httpGet(t, explainAddr, "/explainz?pod="+ns+"/needs-a-node"); body == noSuchPath ||
		(code != http.StatusOK && code != http.StatusNotFound) {
		t.Errorf("/explainz on --explain-address: %d %q, want the explainer's answer", code, body)
	}
	if code, body := httpGet(t, addr, "/explainz?pod="+ns+"/needs-a-node"); code != http.StatusNotFound || body != noSuchPath {
		t.Errorf("/explainz on the Service's port: %d %q, want 404 %q", code, body, noSuchPath)
	}

	// A request with an invalid parameter fails at once; a second after, the
	// retention time, the autoscaler deletes it. Both the condition (server-side
	// apply to status) and the deletion are the service account's.
	prs, err := client.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	pr := &v1.ProvisioningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "invalid", Namespace: ns},
		Spec: v1.ProvisioningRequestSpec{ProvisioningClassName: provreq.ClassCheckCapacity,
			Parameters: map[string]v1.Parameter{provreq.ParamNoRetry: "perhaps"},
			PodSets:    []v1.PodSet{{PodTemplateRef: v1.Reference{Name: "invalid-template"}, Count: 1}}},
	}
	if _, err := prs.ProvisioningRequests(ns).Create(ctx, pr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.Eventually(30*time.Second, "the failed ProvisioningRequest is deleted after its retention time", func(ctx context.Context) (bool, error) {
		_, err := prs.ProvisioningRequests(ns).Get(ctx, pr.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	// The autoscaler logs the deletion once the API server has answered it,
	// so the line may come a moment after the request is gone.
	env.Eventually(10*time.Second, "the autoscaler logs that it deleted the request (not someone else)", func(context.Context) (bool, error) {
		return log.Contains("Deleted a finished ProvisioningRequest"), nil
	})

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("cluster-autoscaler still running 20s after SIGTERM")
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "cluster-autoscaler-status", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("status ConfigMap after a clean exit: err %v, want NotFound (deleted)", err)
	}
	for _, line := range strings.Split(log.String(), "\n") {
		if strings.Contains(strings.ToLower(line), "forbidden") {
			t.Errorf("a request was refused: %s", line)
		}
	}
}

// impersonatingKubeconfig writes a copy of the test cluster's kubeconfig whose
// user acts as the chart's service account.
func impersonatingKubeconfig(t *testing.T, in *installed) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(in.env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, ai := range cfg.AuthInfos {
		ai.Impersonate, ai.ImpersonateGroups = in.user(), in.groups()
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// deleteNodes removes the nodes the provider created for pool (their template
// does not carry the framework's cleanup label).
func deleteNodes(env *framework.Env, pool string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := env.Client.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "pool=" + pool})
	if err != nil {
		env.T.Logf("deleting the nodes of %s: %v", pool, err)
	}
}

// httpGet is the status and body of GET path on address.
func httpGet(t *testing.T, address, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + address + path)
	if err != nil {
		t.Fatalf("GET %s%s: %v", address, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
