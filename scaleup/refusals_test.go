package scaleup

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/estimator"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

// withMemory sets the pod's memory request.
func withMemory(p *apiv1.Pod, mem string) *apiv1.Pod {
	p.Spec.Containers[0].Resources.Requests[apiv1.ResourceMemory] = resource.MustParse(mem)
	return p
}

// onePod is a single pending pod named name, of its own owner (so that no
// two test pods are equivalent).
func onePod(name, cpu string) *apiv1.Pod {
	p := pendingPods(1, cpu)[0]
	p.Name, p.UID = name, "uid-"+types.UID(name)
	p.OwnerReferences[0].UID = "rs-" + types.UID(name)
	return p
}

// byName keys the remaining pods' reasons by pod name, for readable diffs.
func byName(remaining map[*apiv1.Pod]string) map[string]string {
	out := make(map[string]string, len(remaining))
	for p, reason := range remaining {
		out[p.Name] = reason
	}
	return out
}

// TestNotTriggerScaleUpReasons: a pod no group can take is told each
// group's first refusal, counted per reason across groups, in the words of
// the scheduler plugin or of the limit that refused it.
func TestNotTriggerScaleUpReasons(t *testing.T) {
	tainted := templateNode("tainted", "4")
	tainted.Spec.Taints = []apiv1.Taint{{Key: "dedicated", Value: "batch", Effect: apiv1.TaintEffectNoSchedule}}
	twoGroups := func(p *fakeprovider.Provider) {
		p.AddNodeGroup("small", 0, 10, 0, templateNode("small", "4"))
		p.AddNodeGroup("large", 0, 10, 0, templateNode("large", "16"))
	}
	selector := onePod("selector", "1")
	selector.Spec.NodeSelector = map[string]string{"pool": "gpu"}
	for _, tc := range []struct {
		name   string
		groups func(*fakeprovider.Provider)
		opts   func(*Options)
		nodes  []*apiv1.Node
		pod    *apiv1.Pod
		// backOff backs these groups off with STOCKOUT before the loop.
		backOff []string
		want    string
	}{
		{name: "nodeSelector no template has", groups: twoGroups, pod: selector,
			want: "2 node(s) didn't match Pod's node affinity/selector"},
		{name: "insufficient cpu", groups: twoGroups, pod: onePod("cpu", "40"),
			want: "2 Insufficient cpu"},
		{name: "insufficient memory", groups: twoGroups, pod: withMemory(onePod("memory", "1"), "200Gi"),
			want: "2 Insufficient memory"},
		{name: "insufficient cpu and memory", groups: twoGroups, pod: withMemory(onePod("both", "40"), "200Gi"),
			want: "2 Insufficient cpu, 2 Insufficient memory"},
		{name: "untolerated taint", pod: onePod("taint", "1"),
			groups: func(p *fakeprovider.Provider) { p.AddNodeGroup("tainted", 0, 10, 0, tainted) },
			want:   "1 node(s) had untolerated taint(s) (dedicated=batch:NoSchedule)"},
		{name: "a reason per group", pod: onePod("mixed", "8"),
			groups: func(p *fakeprovider.Provider) {
				p.AddNodeGroup("small", 0, 10, 0, templateNode("small", "4"))
				p.AddNodeGroup("full", 0, 0, 0, templateNode("full", "16"))
				p.AddNodeGroup("none", 0, 10, 0, nil)
			},
			want: "1 Insufficient cpu, 1 max node group size reached, 1 no template node to simulate with"},
		{name: "max size", pod: onePod("max", "1"),
			groups: func(p *fakeprovider.Provider) {
				p.AddNodeGroup("small", 0, 0, 0, templateNode("small", "4"))
				p.AddNodeGroup("large", 0, 0, 0, templateNode("large", "16"))
			},
			want: "2 max node group size reached"},
		{name: "max-nodes-total", groups: twoGroups, pod: onePod("total", "2"),
			opts:  func(o *Options) { o.MaxNodesTotal = 1 },
			nodes: []*apiv1.Node{templateNode("n1", "1")},
			want:  "max total nodes in cluster reached (--max-nodes-total=1)"},
		{name: "cores-total", groups: twoGroups, pod: onePod("cores", "1"),
			opts: func(o *Options) { o.Cores.Max = 3 },
			want: "2 max cluster cpu limit reached (--cores-total max 3)"},
		{name: "memory-total", groups: twoGroups, pod: onePod("mem-total", "1"),
			opts: func(o *Options) { o.MemoryGiB.Max = 8 },
			want: "2 max cluster memory limit reached (--memory-total max 8GiB)"},
		{name: "back-off", groups: twoGroups, pod: onePod("backoff", "1"), backOff: []string{"small", "large"},
			want: "2 in backoff after failed scale-up (STOCKOUT)"},
		{name: "back-off and insufficient cpu", groups: twoGroups, pod: onePod("backoff-cpu", "8"), backOff: []string{"large"},
			want: "1 Insufficient cpu, 1 in backoff after failed scale-up (STOCKOUT)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			p := fakeprovider.NewProvider()
			tc.groups(p)
			o := newOrchestrator(t, p, tc.opts)
			if err := o.state.Update(ctx, p, tc.nodes, now); err != nil {
				t.Fatal(err)
			}
			for _, id := range tc.backOff {
				o.state.RegisterFailedScaleUp(ctx, id, clusterstate.BackoffReason{ErrorCode: "STOCKOUT"}, now)
			}
			res, err := runLoop(ctx, o, Input{Now: now, Nodes: tc.nodes, Pending: []*apiv1.Pod{tc.pod}})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Increases) != 0 {
				t.Fatalf("increases %v, want none", increases(res))
			}
			if diff := cmp.Diff(map[string]string{tc.pod.Name: tc.want}, byName(res.Remaining)); diff != "" {
				t.Errorf("remaining (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNotTriggerScaleUpReasonsPerPod: pods left in one loop are each told
// their own reasons, not one summary for all (issue 29's regression: all
// three were told "2 it wouldn't fit if a new node is added").
func TestNotTriggerScaleUpReasonsPerPod(t *testing.T) {
	ctx := context.Background()
	p := fakeprovider.NewProvider()
	p.AddNodeGroup("small", 0, 10, 0, templateNode("small", "4"))
	p.AddNodeGroup("large", 0, 10, 0, templateNode("large", "16"))
	o := newOrchestrator(t, p, nil)
	selector := onePod("selector", "1")
	selector.Spec.NodeSelector = map[string]string{"pool": "gpu"}
	cpu := onePod("cpu", "40")
	memory := withMemory(onePod("memory", "1"), "200Gi")
	res, err := runLoop(ctx, o, Input{Now: time.Now(), Pending: []*apiv1.Pod{selector, cpu, memory}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		selector.Name: "2 node(s) didn't match Pod's node affinity/selector",
		cpu.Name:      "2 Insufficient cpu",
		memory.Name:   "2 Insufficient memory",
	}
	if diff := cmp.Diff(want, byName(res.Remaining)); diff != "" {
		t.Errorf("remaining (-want +got):\n%s", diff)
	}
}

// TestRefusalsMessage: the counts add up per reason across node groups; a
// node group's plugin reasons count once each; a node group whose estimate
// names no refusal for a pod group still counts, in the generic words.
func TestRefusalsMessage(t *testing.T) {
	a := &estimator.Group{Pods: []*apiv1.Pod{onePod("a", "1")}}
	b := &estimator.Group{Pods: []*apiv1.Pod{onePod("b", "1")}}
	cpuAndMemory := &framework.Unschedulable{Pod: a.Pods[0], Plugin: "NodeResourcesFit",
		Reasons: []string{"Insufficient memory", "Insufficient cpu", "Insufficient memory"}}
	affinity := &framework.Unschedulable{Pod: a.Pods[0], Plugin: "NodeAffinity",
		Reasons: []string{"node(s) didn't match Pod's node affinity/selector"}}
	r := newRefusals()
	r.group(reasonMaxSize)
	r.group(backoffReason("STOCKOUT"))
	r.group(reasonMaxSize)
	r.estimate([]*estimator.Group{a, b}, estimator.Estimate{Unschedulable: map[*apiv1.Pod]error{a.Pods[0]: cpuAndMemory}}, nil)
	r.estimate([]*estimator.Group{a, b}, estimator.Estimate{Unschedulable: map[*apiv1.Pod]error{a.Pods[0]: affinity,
		b.Pods[0]: errors.New("snapshot error")}}, nil)
	got := map[string]string{"a": r.message(a), "b": r.message(b)}
	want := map[string]string{
		"a": "1 Insufficient cpu, 1 Insufficient memory, 1 in backoff after failed scale-up (STOCKOUT), " +
			"2 max node group size reached, 1 node(s) didn't match Pod's node affinity/selector",
		"b": "1 in backoff after failed scale-up (STOCKOUT), 1 it wouldn't fit if a new node is added, " +
			"2 max node group size reached, 1 snapshot error",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	if got := newRefusals().message(a); got != "no node group" {
		t.Errorf("no node group: %q", got)
	}
}
