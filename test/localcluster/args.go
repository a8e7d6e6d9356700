package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func etcdArgs(cfg Config, ports map[string]int) []string {
	client := fmt.Sprintf("http://127.0.0.1:%d", ports["etcd"])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports["etcd-peer"])
	return []string{
		"--name=local",
		"--data-dir=" + filepath.Join(cfg.Dir, "etcd"),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=local=" + peer,
		"--unsafe-no-fsync=true",
		"--quota-backend-bytes=8589934592",
		"--log-level=warn",
	}
}

func apiserverArgs(cfg Config, ports map[string]int, p *pki, tokenFile string) []string {
	return []string{
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", ports["etcd"]),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", ports["kube-apiserver"]),
		"--tls-cert-file=" + p.ServingCert,
		"--tls-private-key-file=" + p.ServingKey,
		"--client-ca-file=" + p.CACert,
		"--token-auth-file=" + tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p.SAPub,
		"--service-account-signing-key-file=" + p.SAKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--disable-admission-plugins=ServiceAccount",
		"--allow-privileged=true",
		"--max-requests-inflight=1000",
		"--max-mutating-requests-inflight=500",
		"--profiling=false",
		"--enable-priority-and-fairness=false",
	}
}

// controllers are kube-controller-manager's controllers the tests and the
// demo need: the workloads' (Deployments, StatefulSets, DaemonSets, Jobs),
// PDBs' status, garbage and namespace collection, node lifecycle and taint
// eviction, volumes' binding and protection, DRA's claims, quotas and
// service accounts. Those of clouds, certificates, endpoints, HPAs,
// CronJobs and API storage versions are left out: nothing here uses them,
// and each costs the control plane requests and CPU in every package
// (docs/test-times.md).
var controllers = []string{
	"daemonset-controller", "deployment-controller", "replicaset-controller", "replicationcontroller-controller",
	"statefulset-controller", "job-controller", "disruption-controller", "garbage-collector-controller",
	"namespace-controller", "node-lifecycle-controller", "taint-eviction-controller", "pod-garbage-collector-controller",
	"persistentvolume-binder-controller", "persistentvolume-protection-controller",
	"persistentvolumeclaim-protection-controller", "ephemeral-volume-controller", "resourceclaim-controller",
	"device-taint-eviction-controller", "resourcequota-controller", "serviceaccount-controller",
	"serviceaccount-token-controller", "clusterrole-aggregation-controller",
}

func controllerManagerArgs(cfg Config, ports map[string]int, p *pki, kubeconfig string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", ports["kube-controller-manager"]),
		"--leader-elect=false",
		"--service-account-private-key-file=" + p.SAKey,
		"--root-ca-file=" + p.CACert,
		"--cluster-signing-cert-file=" + p.CACert,
		"--cluster-signing-key-file=" + p.CAKey,
		"--controllers=" + strings.Join(controllers, ","),
		// Longer than kwok's node lease, or healthy fake nodes flap NotReady.
		fmt.Sprintf("--node-monitor-grace-period=%ds", cfg.NodeLeaseSeconds+20),
		"--kube-api-qps=300",
		"--kube-api-burst=600",
		"--profiling=false",
	}
}

func schedulerArgs(ports map[string]int, kubeconfig string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", ports["kube-scheduler"]),
		"--leader-elect=false",
		"--kube-api-qps=300",
		"--kube-api-burst=600",
		"--profiling=false",
	}
}

// writeKwokConfiguration writes kwok's own options (a KwokConfiguration
// document) when cfg asks for any, and returns its path, or "" when kwok's
// defaults do.
func writeKwokConfiguration(cfg Config) (string, error) {
	if cfg.KwokParallelism <= 0 {
		return "", nil
	}
	n := cfg.KwokParallelism
	doc := fmt.Sprintf(`apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  podPlayStageParallelism: %d
  nodePlayStageParallelism: %d
  nodeLeaseParallelism: %d
`, n, n, n)
	path := filepath.Join(cfg.Dir, "kwok-configuration.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		return "", fmt.Errorf("writing kwok's configuration: %w", err)
	}
	return path, nil
}

// UnreachablePodLabel marks a pod whose kubelet is cut off from the control
// plane: kwok never finishes deleting it (it stays Terminating, as on a
// partitioned node that may still run it) until something force-deletes it
// or its Node goes and the pod garbage collector removes it.
const UnreachablePodLabel = "test.autoscaler/unreachable"

// kwokStagePaths lists the stage files kwok runs: those of StagesDir, with
// pod-delete rewritten to skip pods labelled UnreachablePodLabel, and
// pod-ready rewritten to skip pods labelled KwokIgnorePodLabel when set.
func kwokStagePaths(cfg Config) ([]string, error) {
	stages := []string{"node-initialize", "node-heartbeat-with-lease", "pod-ready", "pod-complete", "pod-delete"}
	paths := make([]string, len(stages))
	for i, s := range stages {
		paths[i] = filepath.Join(cfg.StagesDir, s+".yaml")
	}
	var err error
	if paths[4], err = skipLabelled(cfg, paths[4], UnreachablePodLabel); err != nil {
		return nil, err
	}
	if cfg.KwokIgnorePodLabel != "" {
		if paths[2], err = skipLabelled(cfg, paths[2], cfg.KwokIgnorePodLabel); err != nil {
			return nil, err
		}
	}
	return paths, nil
}

// skipLabelled writes a copy of the stage file at path, into cfg.Dir, whose
// selector leaves out pods labelled label, and returns the copy's path.
func skipLabelled(cfg Config, path, label string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	const anchor = "    matchExpressions:\n"
	if !strings.Contains(string(data), anchor) {
		return "", fmt.Errorf("%s: no selector to extend", path)
	}
	skip := fmt.Sprintf("%s    - key: '.metadata.labels[%q]'\n      operator: 'DoesNotExist'\n", anchor, label)
	out := filepath.Join(cfg.Dir, "kwok-"+filepath.Base(path))
	if err := os.WriteFile(out, []byte(strings.Replace(string(data), anchor, skip, 1)), 0o644); err != nil {
		return "", err
	}
	return out, nil
}

// kwokArgs runs kwok with the given --config files ("" entries skipped).
func kwokArgs(cfg Config, ports map[string]int, kubeconfig string, configs []string) []string {
	paths := configs[:0:0]
	for _, c := range configs {
		if c != "" {
			paths = append(paths, c)
		}
	}
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--config=" + strings.Join(paths, ","),
		// Only nodes annotated as fake get a simulated kubelet, so a test can
		// make a node that never becomes Ready by leaving the annotation off.
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		fmt.Sprintf("--node-lease-duration-seconds=%d", cfg.NodeLeaseSeconds),
		fmt.Sprintf("--server-address=127.0.0.1:%d", ports["kwok"]),
		"--node-ip=127.0.0.1",
	}
}
