package capi

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/autoscaler/cluster-autoscaler/test/certs"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// Manager is a running Cluster API core controller manager.
type Manager struct {
	cmd  *exec.Cmd
	Log  *framework.SyncBuffer
	done chan struct{}
}

// ManagerEnv, when set, names the controller manager binary to run instead
// of _output/bin/cluster-api (e.g. one built from a newer tools module before
// _output/bin is rebuilt). It must match Module's CRDs.
const ManagerEnv = "CAPI_TEST_MANAGER"

// StartManager runs _output/bin/cluster-api (or $CAPI_TEST_MANAGER) against
// the cluster of kubeconfig, for the test of namespace (yet reconciling every
// namespace: see below), and waits until it
// is healthy. It is stopped when the test ends (its log is printed if the
// test failed). Its webhooks serve on loopback with throw-away certificates; nothing
// registers them with the API server, so objects must be complete as
// created (see the builders of this package).
func StartManager(t testing.TB, kubeconfig, namespace string) *Manager {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "_output", "bin", "cluster-api")
	if env := os.Getenv(ManagerEnv); env != "" {
		bin = env
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("Cluster API's manager is not built (run hack/build-tools.sh): %v", err)
	}
	dir := t.TempDir()
	c := certs.Write(t, dir)
	if err := os.Rename(c.ServerCert, filepath.Join(dir, "tls.crt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(c.ServerKey, filepath.Join(dir, "tls.key")); err != nil {
		t.Fatal(err)
	}
	addrs := framework.FreeAddresses(t, 3) // chosen together, so that they differ
	health := addrs[0]
	webhookPort := strings.TrimPrefix(addrs[1], "127.0.0.1:")
	m := &Manager{Log: &framework.SyncBuffer{}, done: make(chan struct{})}
	// No --namespace: Cluster API v1.14's controllers check that their cache
	// has caught up with their own writes through each informer's store,
	// which a namespace-scoped cache (controller-runtime's multi-namespace
	// cache) does not give ("failed to cast MachineSet informer to
	// SharedIndexInformer"), so every MachineDeployment and MachineSet
	// reconcile after a write failed. The manager watches every namespace;
	// the tests that start one do not run in parallel, and the
	// infrastructure side (Infra) still serves the test's namespace only.
	_ = namespace // kept for the callers; see above
	m.cmd = exec.Command(bin,
		"--kubeconfig="+kubeconfig,
		"--health-addr="+health, "--insecure-diagnostics", "--diagnostics-address="+addrs[2],
		"--webhook-port="+webhookPort, "--webhook-cert-dir="+dir,
		"--skip-crd-migration-phases=StorageVersionMigration,CleanupManagedFields",
		"--kube-api-qps=100", "--kube-api-burst=200", "--sync-period=1m", "--v=2")
	m.cmd.Stdout, m.cmd.Stderr = m.Log, m.Log
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("starting Cluster API's manager: %v", err)
	}
	go func() { _ = m.cmd.Wait(); close(m.done) }()
	t.Cleanup(func() {
		m.Stop()
		if t.Failed() {
			out := m.Log.String()
			if len(out) > 30000 {
				out = "...\n" + out[len(out)-30000:]
			}
			t.Logf("Cluster API manager log:\n%s", out)
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-m.done:
			t.Fatalf("Cluster API's manager exited at start-up:\n%s", m.Log.String())
		default:
		}
		resp, err := http.Get(fmt.Sprintf("http://%s/readyz", health))
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return m
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Cluster API's manager not ready after 60s:\n%s", m.Log.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Stop ends the manager (SIGTERM, then SIGKILL after 10 s) and waits for it.
func (m *Manager) Stop() {
	select {
	case <-m.done:
		return
	default:
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	select {
	case <-m.done:
	case <-ctx.Done():
		_ = m.cmd.Process.Kill()
		<-m.done
	}
}
