package scaleup

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
)

// workloadPods returns n pods of one ReplicaSet as the informers' cache
// holds them: each its own name and UID, the other parts (containers,
// labels, owner, affinity, ...) shared.
func workloadPods(app string, n int, cpu string, edit func(*apiv1.Pod)) []*apiv1.Pod {
	yes := true
	base := pendingPods(1, cpu)[0]
	base.Labels = map[string]string{"app": app}
	base.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: app, UID: k8stypes.UID(app), Controller: &yes}}
	if edit != nil {
		edit(base)
	}
	out := make([]*apiv1.Pod, n)
	for i := range out {
		p := *base
		p.Name = fmt.Sprintf("%s-%d", app, i)
		p.UID = k8stypes.UID(p.Name)
		out[i] = &p
	}
	return out
}

// TestTryRemoveWithSharedChecksDecidesAsPodByPod: the removal simulation
// of every node of a cluster, one after the other, decides the same (which
// nodes go, each refusal's words, where every pod ends up) whether the pods
// of one workload share a PreFilter result (framework.CheckMemo) or each
// runs PreFilter itself. The cluster mixes workloads without inter-pod
// terms, pods with host ports, and pods whose required anti-affinity repels
// the "web" pods, which move with their nodes' removals (changing what the
// web pods' PreFilter counted).
func TestTryRemoveWithSharedChecksDecidesAsPodByPod(t *testing.T) {
	const nodeCount = 12
	var pods []*apiv1.Pod
	pods = append(pods, workloadPods("web", 24, "500m", nil)...)
	pods = append(pods, workloadPods("api", 10, "1", nil)...)
	pods = append(pods, workloadPods("guard", 3, "100m", func(p *apiv1.Pod) {
		p.Spec.Affinity = &apiv1.Affinity{PodAntiAffinity: &apiv1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []apiv1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				TopologyKey:   "group"}}}}
	})...)
	pods = append(pods, workloadPods("ports", 4, "250m", func(p *apiv1.Pod) {
		p.Spec.Containers[0].Ports = []apiv1.ContainerPort{{ContainerPort: 8080, HostPort: 8080, Protocol: apiv1.ProtocolTCP}}
	})...)
	names := make([]string, nodeCount)
	for i := range names {
		names[i] = fmt.Sprintf("n%02d", i)
	}
	for k, p := range pods {
		p.Spec.NodeName = names[(k*5)%nodeCount]
	}
	type outcome struct {
		Decisions []string
		Placement map[string][]string
	}
	simulate := func(fresh bool) outcome {
		ctx := context.Background()
		s := sessionOn(t, names, "4", pods)
		s.freshChecks = fresh
		byNode := byNode(pods)
		removed := map[string]bool{}
		var out outcome
		for _, n := range names {
			err := s.TryRemoveWhy(ctx, n, byNode[n], removed)
			if err != nil {
				out.Decisions = append(out.Decisions, n+" stays: "+err.Error())
				continue
			}
			removed[n] = true
			out.Decisions = append(out.Decisions, n+" goes")
		}
		out.Placement = map[string][]string{}
		for _, n := range names {
			if removed[n] {
				continue
			}
			for _, p := range s.PodsOn(n) {
				out.Placement[n] = append(out.Placement[n], p.Name)
			}
			sort.Strings(out.Placement[n])
		}
		return out
	}
	fresh, shared := simulate(true), simulate(false)
	if diff := cmp.Diff(fresh, shared); diff != "" {
		t.Errorf("shared PreFilter results changed the simulation (-each pod's own +shared):\n%s", diff)
	}
	gone, kept := 0, 0
	for _, d := range fresh.Decisions {
		if len(d) > 4 && d[len(d)-4:] == "goes" {
			gone++
		} else {
			kept++
		}
	}
	if gone == 0 || kept == 0 {
		t.Errorf("decisions %v: want some nodes to go and some to stay, or the test shows nothing", fresh.Decisions)
	}
}

// sessionOn begins a session on nodes of the given names and CPUs, all of
// one group "ng" (max 20), holding pods.
func sessionOn(t *testing.T, names []string, cpu string, pods []*apiv1.Pod) *Session {
	t.Helper()
	ctx := context.Background()
	provider := fakeprovider.NewProvider()
	provider.AddNodeGroup("ng", 0, 20, len(names), templateNode("ng", cpu))
	var nodes []*apiv1.Node
	for _, name := range names {
		n := templateNode(name, cpu)
		provider.AddNode("ng", n)
		nodes = append(nodes, n)
	}
	o := newOrchestrator(t, provider, nil)
	in := Input{Now: time.Now(), Nodes: nodes, ScheduledPods: pods}
	if err := o.state.Update(ctx, provider, in.Nodes, in.Now); err != nil {
		t.Fatal(err)
	}
	return o.Begin(ctx, in)
}
