package scaledown

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/taints"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// candidateTaints maps the nodes of pool that carry a DeletionCandidate
// taint to its value (the time they became unneeded).
func candidateTaints(ctx context.Context, e *framework.Env, pool string) map[string]string {
	e.T.Helper()
	list, err := e.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "pool=" + pool})
	if err != nil {
		e.T.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range list.Items {
		for _, t := range n.Spec.Taints {
			if t.Key == taints.DeletionCandidate {
				out[n.Name] = t.Value
			}
		}
	}
	return out
}

var loopLine = regexp.MustCompile(`"Scale-down simulation done".*? loop=(\d+).*? unneeded=(\d+)`)

// lastLoop is the number of the last loop whose planner line is logged.
func lastLoop(p *itest.AutoscalerProcess) int {
	last := -1
	for _, m := range loopLine.FindAllStringSubmatch(p.Log.String(), -1) {
		last, _ = strconv.Atoi(m[1])
	}
	return last
}

// spreadReplicaSet runs n small pods pinned to pool, spread over its nodes
// by a soft topology spread (soft, so that the scale-down simulation may
// move them anywhere).
func spreadReplicaSet(e *framework.Env, name, pool string, n int32) {
	e.T.Helper()
	labels := map[string]string{"app": name}
	spec := apiv1.PodSpec{NodeSelector: map[string]string{"pool": pool},
		TopologySpreadConstraints: []apiv1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "kubernetes.io/hostname",
			WhenUnsatisfiable: apiv1.ScheduleAnyway, LabelSelector: &metav1.LabelSelector{MatchLabels: labels}}},
		Containers: []apiv1.Container{{Name: "c", Image: "fake", Resources: apiv1.ResourceRequirements{
			Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("100m"),
				apiv1.ResourceMemory: resource.MustParse("100Mi")}}}}}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.Namespace},
		Spec: appsv1.ReplicaSetSpec{Replicas: &n, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: apiv1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}}}
	if _, err := e.Client.AppsV1().ReplicaSets(e.Namespace).Create(e.Context(), rs, metav1.CreateOptions{}); err != nil {
		e.T.Fatal(err)
	}
}

// TestScaleDownFindsEveryRemovableNode: 30 nodes of one group, each running
// about one small pod, so that all but one could go. With
// --scale-down-non-empty-candidates-count=5 and a pool of 5, every loop
// takes 5 new drain candidates in rotation and keeps the ones found before:
// the unneeded count reaches 29 within ceil(non-empty nodes / 5) + 1 loops
// of the first scale-down simulation, no timer restarts, and no pod is left
// pending (the unneeded time is long, so nothing is removed meanwhile).
func TestScaleDownFindsEveryRemovableNode(t *testing.T) {
	const nodes, per = 30, 5
	e := framework.New(t)
	group := framework.UniqueName("rot")
	path := itest.WriteKwokConfig(e, fmt.Sprintf(`nodeGroups:
- name: %[1]s
  minSize: 0
  maxSize: 40
  template:
    labels: {%[2]s: %[3]s, pool: %[1]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
`, group, framework.TestNamespaceLabel, e.Namespace))
	itest.DumpPods(e)
	for i := 0; i < nodes; i++ {
		itest.GroupNode(e, group, fmt.Sprintf("%s-%02d", group, i), nil)
	}
	spreadReplicaSet(e, "spread", group, nodes)
	var nonEmpty int
	e.Eventually(90*time.Second, "the 30 pods Running", func(ctx context.Context) (bool, error) {
		running, on, err := itest.PodsOf(ctx, e, "spread")
		nonEmpty = len(on)
		return err == nil && running == nodes, err
	})
	t.Logf("the 30 pods run on %d nodes", nonEmpty)
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--scale-down-unneeded-time=10m",
		"--scale-down-delay-after-add=0s", fmt.Sprintf("--scale-down-non-empty-candidates-count=%d", per),
		"--scale-down-candidates-pool-ratio=0.1", fmt.Sprintf("--scale-down-candidates-pool-min-count=%d", per))...)
	e.Eventually(120*time.Second, "29 nodes unneeded", func(ctx context.Context) (bool, error) {
		values, err := itest.ScrapeValues(ctx, p)
		if err != nil {
			return false, nil
		}
		return itest.SumOf(values, "cluster_autoscaler_unneeded_nodes_count") == nodes-1, nil
	})
	// The loops, from the planner's own lines: the first that simulated,
	// and the first that found 29 unneeded.
	first, reached := -1, -1
	for _, m := range loopLine.FindAllStringSubmatch(p.Log.String(), -1) {
		loop, _ := strconv.Atoi(m[1])
		unneeded, _ := strconv.Atoi(m[2])
		if first < 0 {
			first = loop
		}
		if unneeded == nodes-1 && reached < 0 {
			reached = loop
		}
	}
	if first < 0 || reached < 0 {
		t.Fatalf("no planner line with loop and 29 unneeded in the log (first %d, reached %d)", first, reached)
	}
	bound := (nonEmpty+per-1)/per + 1
	t.Logf("29 unneeded in loop %d, %d loops after the first simulation in loop %d (bound %d)", reached,
		reached-first+1, first, bound)
	if reached-first+1 > bound {
		t.Errorf("29 unneeded after %d loops, want at most ceil(%d/%d)+1 = %d", reached-first+1, nonEmpty, per, bound)
	}
	// The timers (the candidate taints' values) stay as later loops check
	// the 29 again.
	var taints map[string]string
	e.Eventually(60*time.Second, "29 candidate taints", func(ctx context.Context) (bool, error) {
		taints = candidateTaints(ctx, e, group)
		return len(taints) == nodes-1, nil
	})
	later := lastLoop(p) + 3
	e.Eventually(60*time.Second, "three more loops", func(context.Context) (bool, error) { return lastLoop(p) >= later, nil })
	if diff := cmp.Diff(taints, candidateTaints(e.Context(), e, group)); diff != "" {
		t.Errorf("candidate taints changed over three loops (-before +after):\n%s", diff)
	}
	running, _, err := itest.PodsOf(e.Context(), e, "spread")
	if err != nil || running != nodes {
		t.Errorf("%d pods running (%v), want all %d", running, err, nodes)
	}
	if n := len(itest.NodeNames(e, group)); n != nodes {
		t.Errorf("%d nodes left, want all %d (the unneeded time is 10 minutes)", n, nodes)
	}
}
