package itest

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/kwok"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// GroupsConfig writes a kwok config of 4-CPU groups, each "name:minSize".
func GroupsConfig(e *framework.Env, groups ...string) string {
	var b strings.Builder
	b.WriteString("nodeGroups:\n")
	for _, g := range groups {
		name, min, _ := strings.Cut(g, ":")
		if min == "" {
			min = "0"
		}
		fmt.Fprintf(&b, `- name: %[1]s
  minSize: %[2]s
  maxSize: 10
  template:
    labels: {%[3]s: %[4]s, pool: %[1]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 1s}
`, name, min, framework.TestNamespaceLabel, e.Namespace)
	}
	return WriteKwokConfig(e, b.String())
}

// GroupNode creates a Node that the kwok provider takes as an instance of group.
func GroupNode(e *framework.Env, group, name string, annotations map[string]string) {
	e.T.Helper()
	n := framework.MakeNode(name).Label("pool", group).Obj()
	n.Annotations[kwok.NodeGroupAnnotation] = group
	for k, v := range annotations {
		n.Annotations[k] = v
	}
	n.Spec.ProviderID = kwok.ProviderIDPrefix + name
	e.CreateNode(n)
}

// ReplicaSet runs n pods of cpu pinned to pool, optionally with an emptyDir volume.
func ReplicaSet(e *framework.Env, name, pool string, n int32, cpu string, emptyDir bool) *appsv1.ReplicaSet {
	e.T.Helper()
	spec := apiv1.PodSpec{NodeSelector: map[string]string{"pool": pool}, Containers: []apiv1.Container{{Name: "c", Image: "fake",
		Resources: apiv1.ResourceRequirements{Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse(cpu),
			apiv1.ResourceMemory: resource.MustParse("100Mi")}}}}}
	if emptyDir {
		spec.Volumes = []apiv1.Volume{{Name: "scratch", VolumeSource: apiv1.VolumeSource{EmptyDir: &apiv1.EmptyDirVolumeSource{}}}}
	}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.Namespace},
		Spec: appsv1.ReplicaSetSpec{Replicas: &n, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: apiv1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}}, Spec: spec}}}
	rs, err := e.Client.AppsV1().ReplicaSets(e.Namespace).Create(e.Context(), rs, metav1.CreateOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	return rs
}

// ScaleDownArgs are ScaleUpArgs with scale-down timers of seconds, plus extra.
func ScaleDownArgs(e *framework.Env, path string, extra ...string) []string {
	return ScaleUpArgs(e, path, append([]string{"--scale-down-unneeded-time=3s", "--scale-down-delay-after-add=0s",
		"--scale-down-delay-after-failure=2s", "--max-graceful-termination-sec=5", "--node-delete-delay-after-taint=1s"}, extra...)...)
}

// PodsOf counts the running pods of an app and the nodes they run on.
func PodsOf(ctx context.Context, e *framework.Env, app string) (running int, nodes map[string]int, err error) {
	list, err := e.Client.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		return 0, nil, err
	}
	nodes = map[string]int{}
	for _, p := range list.Items {
		if p.Status.Phase == apiv1.PodRunning && p.DeletionTimestamp == nil {
			running++
			nodes[p.Spec.NodeName]++
		}
	}
	return running, nodes, nil
}

// HasTaintKey reports whether n has a taint with key.
func HasTaintKey(n *apiv1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// UnremovableNodes reads the status ConfigMap's unremovable nodes (the
// autoscaler's --namespace is the test's), by node; none before it is written.
func UnremovableNodes(ctx context.Context, e *framework.Env) (map[string]clusterstate.UnremovableNode, error) {
	cm, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Get(ctx, "cluster-autoscaler-status", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var kept []clusterstate.UnremovableNode
	if err := yaml.Unmarshal([]byte(cm.Data[clusterstate.UnremovableDataKey]), &kept); err != nil {
		return nil, err
	}
	out := map[string]clusterstate.UnremovableNode{}
	for _, u := range kept {
		out[u.Name] = u
	}
	return out, nil
}
