package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"k8s.io/autoscaler/cluster-autoscaler/core"
)

// The in-process loop benchmark (loopbench_test.go) runs on a cluster
// described as a /snapshotz dump (core.DebuggingSnapshot): either one
// generated here (syntheticCluster) or a user's own, read from the file
// LOOP_BENCH_SNAPSHOT names (readSnapshotFile). loopClusterOf turns a dump
// into what the benchmark fills the informer caches and the provider with.

// groupLabel is the label the synthetic cluster's nodes and templates carry
// their node group in.
const groupLabel = "bench.autoscaler/group"

// synthSpec describes a synthetic cluster: Nodes nodes of 16 CPU / 64 GiB
// in group "base", each running PodsPerNode pods of ReplicaSets of 300
// replicas (pod g of the cluster on node g mod Nodes); the first LowNodes
// nodes run small pods (100m / 256 MiB: 19% of the node, below the
// scale-down threshold), the others 300m / 1 GiB (56%: above it). Pending
// pods (1 CPU / 1 GiB, unschedulable) come in ReplicaSets of PendingPerSet
// (0: 1,000); those of every second one select the template-only group "new"
// (16 CPU).
type synthSpec struct {
	Nodes, PodsPerNode, LowNodes, Pending, PendingPerSet int
}

const synthReplicas = 300

// syntheticCluster builds the dump of spec's cluster.
func syntheticCluster(spec synthSpec) *core.DebuggingSnapshot {
	created := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	snap := &core.DebuggingSnapshot{TemplateNodes: map[string]*core.SnapshotNode{
		"base": {Node: synthNode("template-base", "base", created), Pods: []*apiv1.Pod{}},
		"new":  {Node: synthNode("template-new", "new", created), Pods: []*apiv1.Pod{}},
	}, PendingPods: []*apiv1.Pod{}}
	for i := 0; i < spec.Nodes; i++ {
		snap.NodeList = append(snap.NodeList, &core.SnapshotNode{Node: synthNode(fmt.Sprintf("node-%05d", i), "base", created),
			Pods: make([]*apiv1.Pod, 0, spec.PodsPerNode)})
	}
	for j := 0; j < spec.PodsPerNode; j++ {
		for i := 0; i < spec.Nodes; i++ {
			g := j*spec.Nodes + i
			kind, cpu, mem := "web", "300m", "1Gi"
			if i < spec.LowNodes {
				kind, cpu, mem = "low", "100m", "256Mi"
			}
			p := synthPod(fmt.Sprintf("%s-%d", kind, g/synthReplicas), g%synthReplicas, cpu, mem, created)
			p.Spec.NodeName = snap.NodeList[i].Node.Name
			p.Status.Phase = apiv1.PodRunning
			p.Status.Conditions = []apiv1.PodCondition{{Type: apiv1.PodScheduled, Status: apiv1.ConditionTrue},
				{Type: apiv1.PodReady, Status: apiv1.ConditionTrue}}
			snap.NodeList[i].Pods = append(snap.NodeList[i].Pods, p)
		}
	}
	perSet := spec.PendingPerSet
	if perSet <= 0 {
		perSet = 1000
	}
	for k := 0; k < spec.Pending; k++ {
		rs := k / perSet
		p := synthPod(fmt.Sprintf("burst-%d", rs), k%perSet, "1", "1Gi", created)
		if rs%2 == 1 {
			p.Spec.NodeSelector = map[string]string{groupLabel: "new"}
		}
		p.Status.Phase = apiv1.PodPending
		p.Status.Conditions = []apiv1.PodCondition{{Type: apiv1.PodScheduled, Status: apiv1.ConditionFalse,
			Reason: apiv1.PodReasonUnschedulable, LastTransitionTime: created}}
		snap.PendingPods = append(snap.PendingPods, p)
	}
	return snap
}

func synthNode(name, group string, created metav1.Time) *apiv1.Node {
	capacity := apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("16"),
		apiv1.ResourceMemory: resource.MustParse("64Gi"), apiv1.ResourcePods: resource.MustParse("110")}
	return &apiv1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), CreationTimestamp: created,
			Labels: map[string]string{groupLabel: group, apiv1.LabelHostname: name, apiv1.LabelOSStable: "linux",
				apiv1.LabelArchStable: "amd64", apiv1.LabelInstanceTypeStable: "bench-16"}},
		Spec: apiv1.NodeSpec{ProviderID: "bench://" + name},
		Status: apiv1.NodeStatus{Capacity: capacity, Allocatable: capacity.DeepCopy(),
			Conditions: []apiv1.NodeCondition{{Type: apiv1.NodeReady, Status: apiv1.ConditionTrue,
				LastTransitionTime: created}}},
	}
}

func synthPod(rs string, i int, cpu, mem string, created metav1.Time) *apiv1.Pod {
	controller := true
	name := fmt.Sprintf("%s-%d", rs, i)
	return &apiv1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name), CreationTimestamp: created,
			Labels: map[string]string{"app": rs},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs,
				UID: types.UID("rs-" + rs), Controller: &controller}}},
		Spec: apiv1.PodSpec{Containers: []apiv1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
			Resources: apiv1.ResourceRequirements{Requests: apiv1.ResourceList{
				apiv1.ResourceCPU: resource.MustParse(cpu), apiv1.ResourceMemory: resource.MustParse(mem)}}}}},
	}
}

// readSnapshotFile reads a /snapshotz dump (curl -s <address>/snapshotz).
func readSnapshotFile(path string) (*core.DebuggingSnapshot, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the snapshot dump: %w", err)
	}
	defer f.Close()
	var snap core.DebuggingSnapshot
	if err := json.NewDecoder(f).Decode(&snap); err != nil {
		return nil, fmt.Errorf("decoding the snapshot dump %s: %w", path, err)
	}
	if snap.Error != "" {
		return nil, fmt.Errorf("the snapshot dump %s holds an error: %s", path, snap.Error)
	}
	return &snap, nil
}

// loopCluster is a dump made ready for the informer caches and the
// benchmark's provider.
type loopCluster struct {
	Nodes       []*apiv1.Node
	Pods        []*apiv1.Pod // scheduled and pending
	ReplicaSets []*appsv1.ReplicaSet
	Groups      []*benchGroupSpec
}

// benchGroupSpec is a node group of the benchmark's provider.
type benchGroupSpec struct {
	ID       string
	Template *apiv1.Node
	Nodes    []string // node names
}

// loopClusterOf turns a dump into a loopCluster. The dump has no
// ReplicaSets: one is made for every ReplicaSet named as a pod's controller,
// with as many replicas as it has pods. Nor does it say which group a node
// is in: a node belongs to the group whose template's labels (but the
// hostname) it carries all of, the template with most labels winning; a
// node no template matches goes to a group of its instance type whose
// template is that group's first node. Nodes without a provider ID get one.
func loopClusterOf(snap *core.DebuggingSnapshot) (*loopCluster, error) {
	c := &loopCluster{}
	ids := make([]string, 0, len(snap.TemplateNodes))
	for id, t := range snap.TemplateNodes {
		if t == nil || t.Node == nil {
			return nil, fmt.Errorf("template node of group %q is missing", id)
		}
		ids = append(ids, id)
	}
	sort.Strings(ids)
	groups := map[string]*benchGroupSpec{}
	for _, id := range ids {
		g := &benchGroupSpec{ID: id, Template: snap.TemplateNodes[id].Node}
		groups[id] = g
		c.Groups = append(c.Groups, g)
	}
	seen := map[string]bool{}
	for _, sn := range snap.NodeList {
		if sn == nil || sn.Node == nil {
			return nil, fmt.Errorf("a NodeList entry has no node")
		}
		n := sn.Node
		if seen[n.Name] {
			return nil, fmt.Errorf("node %q is listed twice", n.Name)
		}
		seen[n.Name] = true
		if n.Spec.ProviderID == "" {
			n.Spec.ProviderID = "bench://" + n.Name
		}
		g := groups[groupOf(n, c.Groups)]
		if g == nil {
			id := "nodes-" + n.Labels[apiv1.LabelInstanceTypeStable]
			if g = groups[id]; g == nil {
				g = &benchGroupSpec{ID: id, Template: n}
				groups[id] = g
				c.Groups = append(c.Groups, g)
			}
		}
		g.Nodes = append(g.Nodes, n.Name)
		c.Nodes = append(c.Nodes, n)
		for _, p := range sn.Pods {
			if p.Spec.NodeName == "" {
				p.Spec.NodeName = n.Name
			}
			c.Pods = append(c.Pods, p)
		}
	}
	c.Pods = append(c.Pods, snap.PendingPods...)
	c.ReplicaSets = replicaSetsOf(c.Pods)
	return c, nil
}

// groupOf names the template group whose labels (hostname aside) n carries
// all of, the most specific first; "" when none.
func groupOf(n *apiv1.Node, groups []*benchGroupSpec) string {
	best, bestLabels := "", -1
	for _, g := range groups {
		matched := 0
		for k, v := range g.Template.Labels {
			if k == apiv1.LabelHostname {
				continue
			}
			if n.Labels[k] != v {
				matched = -1
				break
			}
			matched++
		}
		if matched > bestLabels {
			best, bestLabels = g.ID, matched
		}
	}
	return best
}

// replicaSetsOf makes the ReplicaSets the pods name as their controller.
func replicaSetsOf(pods []*apiv1.Pod) []*appsv1.ReplicaSet {
	byUID := map[types.UID]*appsv1.ReplicaSet{}
	var out []*appsv1.ReplicaSet
	for _, p := range pods {
		ref := metav1.GetControllerOf(p)
		if ref == nil || ref.Kind != "ReplicaSet" || !strings.HasPrefix(ref.APIVersion, "apps/") {
			continue
		}
		rs := byUID[ref.UID]
		if rs == nil {
			zero := int32(0)
			rs = &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: ref.Name, UID: ref.UID},
				Spec: appsv1.ReplicaSetSpec{Replicas: &zero}}
			byUID[ref.UID] = rs
			out = append(out, rs)
		}
		*rs.Spec.Replicas++
		rs.Status.Replicas++
		rs.Status.ReadyReplicas++
		rs.Status.AvailableReplicas++
	}
	return out
}
