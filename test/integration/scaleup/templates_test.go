package scaleup

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/kwok"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// TestBalancedScaleUpOverSimilarGroups: two groups that differ only by zone
// (and a pool label the flags tell the autoscaler to ignore) share a
// scale-up evenly.
func TestBalancedScaleUpOverSimilarGroups(t *testing.T) {
	e := framework.New(t)
	za, zb, shape := framework.UniqueName("zone-a"), framework.UniqueName("zone-b"), framework.UniqueName("shape")
	path := itest.WriteKwokConfig(e, fmt.Sprintf(`
nodeGroups:
- name: %[1]s
  maxSize: 10
  template:
    labels: {%[3]s: %[4]s, pool: %[1]s, shape: %[5]s, topology.kubernetes.io/zone: a, node.kubernetes.io/instance-type: standard-4}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 1s}
- name: %[2]s
  maxSize: 10
  template:
    labels: {%[3]s: %[4]s, pool: %[2]s, shape: %[5]s, topology.kubernetes.io/zone: b, node.kubernetes.io/instance-type: standard-4}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 1s}
`, za, zb, framework.TestNamespaceLabel, e.Namespace, shape))
	itest.DumpPods(e)
	itest.CreatePods(e, "web", 16, "1", map[string]string{"shape": shape}) // four nodes
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--balance-similar-node-groups",
		"--balancing-ignore-label=pool", "--balancing-ignore-label="+framework.TestNamespaceLabel)...)
	e.Eventually(60*time.Second, "all 16 pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 16)
	})
	if got := itest.NodesPerPool(e); got[za] != 2 || got[zb] != 2 {
		t.Errorf("nodes per group = %v, want 2 and 2", got)
	}
	if !p.Log.Written("increases=2 nodesAdded=4") {
		t.Error("the balanced scale-up was not one decision over both groups")
	}
}

// TestTemplateFromARealNodeWithDaemonSet: a group whose provider has no
// template is scaled from a copy of its one node, and the DaemonSet that
// runs on every node takes its share of each new one (here through the
// agent pod the copied node runs; DaemonSets not yet on the node are added
// from the DaemonSet lister, which scaleup's unit tests cover).
func TestTemplateFromARealNodeWithDaemonSet(t *testing.T) {
	e := framework.New(t)
	group := framework.UniqueName("notemplate")
	path := itest.WriteKwokConfig(e, fmt.Sprintf(`
nodeGroups:
- name: %[1]s
  maxSize: 10
  template:
    fromNodes: true
    labels: {%[2]s: %[3]s, pool: %[1]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 1s}
`, group, framework.TestNamespaceLabel, e.Namespace))
	// The group's first node, made as the provider makes them.
	first := framework.MakeNode(group+"-first").Label("pool", group).Obj()
	first.Annotations[kwok.NodeGroupAnnotation] = group
	first.Spec.ProviderID = kwok.ProviderIDPrefix + first.Name
	e.CreateNode(first)
	// An agent on every node of the pool: 1 CPU each.
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: e.Namespace},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: apiv1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
				Spec: apiv1.PodSpec{NodeSelector: map[string]string{"pool": group}, Containers: []apiv1.Container{{
					Name: "agent", Image: "fake", Resources: apiv1.ResourceRequirements{Requests: apiv1.ResourceList{
						apiv1.ResourceCPU: resource.MustParse("1"), apiv1.ResourceMemory: resource.MustParse("100Mi")}}}}}}}}
	if _, err := e.Client.AppsV1().DaemonSets(e.Namespace).Create(e.Context(), ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(30*time.Second, "the agent Running on the first node", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 1)
	})
	itest.DumpPods(e)
	// Eleven one-CPU pods: three fit beside the agent on the first node, and
	// three on each new one: three new nodes. A template without the agent
	// would have room for four and ask for two.
	itest.CreatePods(e, "web", 11, "1", map[string]string{"pool": group})
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path)...)
	// kube-scheduler may give a new node's room to web pods before the
	// DaemonSet controller has created its agent there (the agent then
	// waits); what this test checks is the autoscaler's count.
	e.Eventually(90*time.Second, "all 11 web pods Running", func(ctx context.Context) (bool, error) {
		pods, err := e.Client.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		running := 0
		for _, p := range pods.Items {
			if strings.HasPrefix(p.Name, "web-") && p.Status.Phase == apiv1.PodRunning {
				running++
			}
		}
		return running == 11, nil
	})
	time.Sleep(3 * time.Second) // a few more loops: no second scale-up
	if got := itest.NodesPerPool(e)[group]; got != 4 {
		t.Errorf("%d nodes in the group, want 4 (the first and three new)", got)
	}
	if n := strings.Count(p.Log.String(), `"Scaled up node group"`); n != 1 {
		t.Errorf("%d scale-ups, want one", n)
	}
}
