package clusterapi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// TestManagementConfig: --cloud-config wins; without it --kubeconfig is the
// management cluster unless --clusterapi-cloud-config-authoritative, which
// means in-cluster (here: no in-cluster environment, so a clear error).
func TestManagementConfig(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	dir := t.TempDir()
	write := func(name, server string) string {
		p := filepath.Join(dir, name)
		kc := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: " + server + "}\n" +
			"contexts:\n- name: c\n  context: {cluster: c}\ncurrent-context: c\n"
		if err := os.WriteFile(p, []byte(kc), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	workload, mgmt := write("workload", "https://127.0.0.1:1001"), write("mgmt", "https://127.0.0.1:1002")
	tests := []struct {
		name        string
		opts        cloudprovider.Options
		wantHost    string
		wantErrPart string
	}{
		{name: "cloud-config", opts: cloudprovider.Options{Kubeconfig: workload, CloudConfig: mgmt}, wantHost: "https://127.0.0.1:1002"},
		{name: "authoritative cloud-config", opts: cloudprovider.Options{Kubeconfig: workload, CloudConfig: mgmt,
			ClusterAPICloudConfigAuthoritative: true}, wantHost: "https://127.0.0.1:1002"},
		{name: "fallback to kubeconfig", opts: cloudprovider.Options{Kubeconfig: workload}, wantHost: "https://127.0.0.1:1001"},
		{name: "authoritative: in-cluster, not kubeconfig", opts: cloudprovider.Options{Kubeconfig: workload,
			ClusterAPICloudConfigAuthoritative: true}, wantErrPart: "--clusterapi-cloud-config-authoritative"},
		{name: "unreadable cloud-config", opts: cloudprovider.Options{CloudConfig: filepath.Join(dir, "missing")},
			wantErrPart: "--cloud-config"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := managementConfig(cloudprovider.BuildOptions{Options: tc.opts})
			if tc.wantErrPart != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrPart) {
					t.Fatalf("err = %v, want one naming %q", err, tc.wantErrPart)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tc.wantHost {
				t.Errorf("management cluster = %s, want %s", cfg.Host, tc.wantHost)
			}
		})
	}
}
