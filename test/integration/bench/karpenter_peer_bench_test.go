//go:build karpenterpeer

package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"k8s.io/autoscaler/cluster-autoscaler/test/capi"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

var (
	peerNodePool  = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"}
	peerNodeClass = schema.GroupVersionResource{Group: "karpenter.kwok.sh", Version: "v1alpha1", Resource: "kwoknodeclasses"}
)

// BenchmarkKarpenterConsolidation (issue 40, item 7: "measured side by side
// with Karpenter on the same workload") runs Karpenter's kwok provider in
// place of the autoscaler on BenchmarkConsolidation's workload, cut and
// measures: the same control plane, groups (as instance types of the same
// sizes and prices, allocatable exactly as the kwok groups'), Deployments,
// PDBs, cut, samples, floor and report. Karpenter makes the setup's nodes
// itself (one placeholder pod per node, its NodePools' budgets at 0 until
// the workload is Ready), so that it owns every node it may consolidate;
// from the cut on, its budgets are its default (10% of a NodePool's nodes)
// and its consolidation its default (WhenEmptyOrUnderutilized, after 0s).
//
// Nothing of Karpenter is in this repository and nothing here builds it:
// behind the build tag karpenterpeer, it runs a binary built elsewhere.
// KARPENTER_BIN is the binary of Karpenter's ./kwok package; KARPENTER_CRDS
// a directory holding its CRDs (pkg/apis/crds/*.yaml and
// kwok/apis/crds/*.yaml of the same checkout); KARPENTER_POOLS=one puts the
// three instance types in one NodePool (Karpenter's usual setup) rather
// than a NodePool per group (budgets per group, as the autoscaler's);
// KARPENTER_LOG keeps its log. docs/benchmarks.md has the figures and the
// commit measured:
//
//	KARPENTER_BIN=... KARPENTER_CRDS=... go test -tags karpenterpeer -run xxx \
//	    -bench KarpenterConsolidation -benchtime 1x -timeout 60m -v ./test/integration/bench
func BenchmarkKarpenterConsolidation(b *testing.B) {
	bin, crds := os.Getenv("KARPENTER_BIN"), os.Getenv("KARPENTER_CRDS")
	if bin == "" || crds == "" {
		b.Fatal("KARPENTER_BIN and KARPENTER_CRDS are needed")
	}
	for i := 0; i < b.N; i++ {
		benchKarpenter(b, bin, crds)
	}
}

func peerInstanceTypes() []byte {
	var out []map[string]any
	for _, g := range consolidateGroups {
		mem := resource.MustParse(g.memoryPerNode)
		mem.Add(resource.MustParse("10Mi")) // the kwok provider's kube-reserved memory
		out = append(out, map[string]any{
			"name": g.name,
			"offerings": []map[string]any{{
				"Price": g.pricePerHour, "Available": true,
				"Requirements": []map[string]any{
					{"key": "karpenter.sh/capacity-type", "operator": "In", "values": []string{"on-demand"}},
					{"key": "topology.kubernetes.io/zone", "operator": "In", "values": []string{"test-zone-a"}},
				},
			}},
			"architecture":     "amd64",
			"operatingSystems": []string{"linux"},
			// 100m of kube-reserved CPU: allocatable is g.cpu exactly.
			"resources": map[string]string{"cpu": fmt.Sprintf("%dm", g.cpu*1000+100), "memory": mem.String(), "pods": "110"},
		})
	}
	data, _ := json.Marshal(out)
	return data
}

// peerPool is one NodePool: its name and instance types.
type peerPool struct {
	name  string
	types []any
}

// peerPools: a NodePool per group (labelled size=<group>, budgets per
// group as the autoscaler's), or one NodePool of the three instance types
// (Karpenter's usual setup; a goroutine labels its nodes size=<type>).
func peerPools(one bool) []peerPool {
	var out []peerPool
	var all []any
	for _, g := range consolidateGroups {
		out = append(out, peerPool{name: g.name, types: []any{g.name}})
		all = append(all, g.name)
	}
	if one {
		return []peerPool{{name: "all", types: all}}
	}
	return out
}

// peerLabelNodes adds size=<instance type> to the pool's nodes that lack it.
func peerLabelNodes(e *framework.Env) {
	for e.Context().Err() == nil {
		list, err := e.Client.CoreV1().Nodes().List(e.Context(), metav1.ListOptions{LabelSelector: "pool=" + consolidatePool + ",!size"})
		if err == nil {
			for _, n := range list.Items {
				patch := fmt.Sprintf(`{"metadata":{"labels":{"size":%q}}}`, n.Labels["node.kubernetes.io/instance-type"])
				_, _ = e.Client.CoreV1().Nodes().Patch(e.Context(), n.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func peerNodePoolObj(np peerPool, budget string) *unstructured.Unstructured {
	labels := map[string]any{"pool": consolidatePool}
	cpu := 0
	for _, g := range consolidateGroups {
		for _, t := range np.types {
			if t == g.name {
				cpu += g.max * g.cpu
			}
		}
	}
	if len(np.types) == 1 {
		labels["size"] = np.name
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
		"metadata": map[string]any{"name": np.name},
		"spec": map[string]any{
			"template": map[string]any{
				"metadata": map[string]any{"labels": labels},
				"spec": map[string]any{
					"requirements": []any{
						map[string]any{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": np.types},
						map[string]any{"key": "karpenter.sh/capacity-type", "operator": "In", "values": []any{"on-demand"}},
					},
					"nodeClassRef": map[string]any{"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
				},
			},
			"limits":     map[string]any{"cpu": fmt.Sprint(cpu)},
			"disruption": map[string]any{"budgets": []any{map[string]any{"nodes": budget}}},
		},
	}}
}

func benchKarpenter(b *testing.B, bin, crdDir string) {
	b.StopTimer()
	duration := envDuration(b, "CONSOLIDATE_DURATION", 11*time.Minute)
	e := framework.NewCluster(b, framework.ClusterOptions{NodeLeaseSeconds: 240, KwokParallelism: 16})
	dyn := dynamic.NewForConfigOrDie(e.Config)
	ctx := e.Context()

	crds, err := capi.ReadCRDs(crdDir)
	if err != nil {
		b.Fatal(err)
	}
	if err := capi.CreateCRDs(ctx, dyn, crds); err != nil {
		b.Fatal(err)
	}

	dir := b.TempDir()
	itPath := filepath.Join(dir, "instance_types.json")
	if err := os.WriteFile(itPath, peerInstanceTypes(), 0o600); err != nil {
		b.Fatal(err)
	}
	// Karpenter takes ports, not addresses, for its metrics and probes: it
	// listens on every interface of this machine. It talks only to the
	// control plane on 127.0.0.1 (the kubeconfig).
	ports := framework.FreeAddresses(b, 2)
	port := func(a string) string { return a[strings.LastIndex(a, ":")+1:] }
	logPath := os.Getenv("KARPENTER_LOG")
	if logPath == "" {
		logPath = filepath.Join(dir, "karpenter.log")
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.Kubeconfig, "INSTANCE_TYPES_FILE_PATH="+itPath,
		"DISABLE_LEADER_ELECTION=true", "METRICS_PORT="+port(ports[0]), "HEALTH_PROBE_PORT="+port(ports[1]),
		"KUBE_CLIENT_QPS=200", "KUBE_CLIENT_BURST=400", "LOG_LEVEL=info", "SYSTEM_NAMESPACE=default")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	onePool := os.Getenv("KARPENTER_POOLS") == "one"
	if onePool {
		go peerLabelNodes(e)
	}
	if _, err := dyn.Resource(peerNodeClass).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": map[string]any{"name": "default"}}},
		metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	pools := peerPools(onePool)
	for _, np := range pools {
		if _, err := dyn.Resource(peerNodePool).Create(ctx, peerNodePoolObj(np, "0"), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}

	// Karpenter makes the nodes of the cut's setup: one placeholder pod per
	// node, too big for two on a node of its size; no disruption meanwhile
	// (budgets of 0).
	setupStart := time.Now()
	nodes, totalCPU := 0, 0
	for _, g := range consolidateGroups {
		nodes += g.initial
		totalCPU += g.initial * g.cpu
		for i := 0; i < g.initial; i++ {
			pod := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ph-%s-%03d", g.name, i), Namespace: e.Namespace},
				Spec: apiv1.PodSpec{NodeSelector: map[string]string{"pool": consolidatePool, "node.kubernetes.io/instance-type": g.name},
					Containers: []apiv1.Container{{Name: "c", Image: "fake", Resources: apiv1.ResourceRequirements{
						Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse(fmt.Sprint(g.cpu - 1))}}}}}}
			if _, err := e.Client.CoreV1().Pods(e.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	waitNodesReady(b, e, consolidatePool, nodes, 20*time.Minute)
	// Every placeholder bound (one per node), then gone.
	for deadline := time.Now().Add(10 * time.Minute); ; {
		list, err := e.Client.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		bound := 0
		for _, p := range list.Items {
			if strings.HasPrefix(p.Name, "ph-") && p.Spec.NodeName != "" {
				bound++
			}
		}
		if bound == nodes {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d placeholders bound", bound, nodes)
		}
		time.Sleep(3 * time.Second)
	}
	zero := int64(0)
	for _, g := range consolidateGroups {
		for i := 0; i < g.initial; i++ {
			_ = e.Client.CoreV1().Pods(e.Namespace).Delete(ctx, fmt.Sprintf("ph-%s-%03d", g.name, i),
				metav1.DeleteOptions{GracePeriodSeconds: &zero})
		}
	}
	workloads := consolidateWorkload(b, e, totalCPU)
	total := workloads * consolidateReplicas
	counts := consolidateNodeCounts(b, e)
	startCost := consolidateCostOf(counts)
	b.Logf("setup: %v nodes ($%.2f/h), %d pods Ready in %.0fs; load average %s", counts, startCost, total,
		time.Since(setupStart).Seconds(), loadAverage())

	// Karpenter's default budget from now on.
	for _, np := range pools {
		patch := []byte(`{"spec":{"disruption":{"budgets":[{"nodes":"10%"}]}}}`)
		if _, err := dyn.Resource(peerNodePool).Patch(ctx, np.name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	watch := watchDisruption(b, e)
	time.Sleep(10 * time.Second)

	consolidateCut(b, e, watch, workloads, startCost, duration, func() string { return "not counted (Karpenter)" })
}
