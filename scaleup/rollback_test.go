package scaleup

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/podutil"
)

// podsByInstance is InstancePods from a fixed answer.
type podsByInstance struct {
	pods map[string]NodePods
	err  error
}

func (p podsByInstance) PodsOn(context.Context, []string) (map[string]NodePods, error) {
	return p.pods, p.err
}

func runningPod(ns, name string, mutate func(*apiv1.Pod)) *apiv1.Pod {
	p := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Status: apiv1.PodStatus{Phase: apiv1.PodRunning}}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func consumes(request string) func(*apiv1.Pod) {
	return func(p *apiv1.Pod) { p.Annotations = map[string]string{podutil.ConsumeAnnotation: request} }
}

// A rollback never deletes a node that runs pods other than its request's
// own (DaemonSet and static pods, and pods that finished, do not count):
// the instance is kept and returned with the reason; the others go.
func TestRollbackKeepsNodesRunningOtherPods(t *testing.T) {
	daemon := func(p *apiv1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "ds", Controller: new(true)}}
	}
	done := func(p *apiv1.Pod) { p.Status.Phase = apiv1.PodSucceeded }
	otherNS := func(p *apiv1.Pod) { consumes("job")(p); p.Namespace = "other" }
	for _, tc := range []struct {
		name    string
		request string
		pods    []*apiv1.Pod
		kept    bool
	}{
		{name: "no pods", request: "ns/job"},
		{name: "the request's consumer", request: "ns/job", pods: []*apiv1.Pod{runningPod("ns", "w", consumes("job"))}},
		{name: "DaemonSet, static and finished pods", request: "ns/job", pods: []*apiv1.Pod{
			runningPod("kube-system", "ds-x", daemon), runningPod("kube-system", "static", func(p *apiv1.Pod) {
				p.Annotations = map[string]string{apiv1.MirrorPodAnnotationKey: "x"}
			}), runningPod("ns", "batch", done)}},
		{name: "an ordinary pod", request: "ns/job", pods: []*apiv1.Pod{runningPod("ns", "web", nil)}, kept: true},
		{name: "another request's consumer", request: "ns/job", pods: []*apiv1.Pod{runningPod("ns", "w", consumes("other"))}, kept: true},
		{name: "same name, other namespace", request: "ns/job", pods: []*apiv1.Pod{runningPod("other", "w", otherNS)}, kept: true},
		{name: "request not known", pods: []*apiv1.Pod{runningPod("ns", "w", consumes("job"))}, kept: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			provider := fakeprovider.NewProvider()
			g := provider.AddNodeGroup("small", 0, 10, 0, templateNode("small", "4"))
			if err := g.IncreaseSize(ctx, 2); err != nil {
				t.Fatal(err)
			}
			instances, _ := g.Nodes(ctx)
			busy, free := instances[0].Id, instances[1].Id
			o := newOrchestrator(t, provider, nil)
			WithInstancePods(podsByInstance{pods: map[string]NodePods{busy: {Node: "n0", Pods: tc.pods}, free: {Node: "n1"}}})(o)
			left, err := o.Rollback(ctx, map[string]Undo{"small": {Instances: []string{busy, free}, Request: tc.request}}, "test")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range calls(provider, "ForceDeleteNodes") {
				for _, n := range c.Nodes {
					for _, in := range []string{busy, free} {
						if strings.HasSuffix(in, "/"+n) {
							got = append(got, in)
						}
					}
				}
			}
			want := []string{busy, free}
			if tc.kept {
				want = []string{free}
				if rest := left["small"]; len(rest.Instances) != 1 || rest.Instances[0] != busy ||
					!strings.Contains(rest.Kept[busy], "node n0 runs pods that are not the request's") {
					t.Errorf("left %v, want %s kept with the reason", left, busy)
				}
			} else if len(left) != 0 {
				t.Errorf("left %v, want nothing", left)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("deleted instances (-want +got):\n%s", diff)
			}
		})
	}
}

// When what runs on the nodes cannot be read, nothing is deleted.
func TestRollbackDeletesNothingWhenThePodsAreUnknown(t *testing.T) {
	ctx := context.Background()
	provider := fakeprovider.NewProvider()
	g := provider.AddNodeGroup("small", 0, 10, 0, templateNode("small", "4"))
	if err := g.IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	instances, _ := g.Nodes(ctx)
	o := newOrchestrator(t, provider, nil)
	WithInstancePods(podsByInstance{err: errors.New("cache not synced")})(o)
	left, err := o.Rollback(ctx, map[string]Undo{"small": {Instances: []string{instances[0].Id}}}, "test")
	if err == nil || len(left["small"].Instances) != 1 || len(calls(provider, "ForceDeleteNodes")) != 0 {
		t.Errorf("left %v err %v deletions %v; want an error and nothing deleted", left, err, calls(provider, "ForceDeleteNodes"))
	}
}

func nodeWithID(name, providerID string) *apiv1.Node {
	return &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: apiv1.NodeSpec{ProviderID: providerID}}
}

// The listers' answer: the Node that is each instance as the provider
// matches them (another spelling of the same ID included), and the pods
// bound to it; a Node that only may be the instance (an ID that differs in
// case) is returned as unsure; an instance no Node may be is left out.
func TestInstancePodsFromListers(t *testing.T) {
	provider := fakeprovider.NewProvider()
	provider.AddNodeGroup("g", 0, 10, 0, nil)
	for _, id := range []string{"fake:///zone/i1", "fake:///zone/i2", "fake:///zone/i3", "fake:///RG/zone/I4"} {
		provider.AddNode("g", nodeWithID("x", id))
	}
	nodes := nodeList{nodeWithID("n1", "fake:///zone/i1"), nodeWithID("n2", "fake://zone/i2"),
		nodeWithID("n4", "fake:///rg/zone/i4")}
	web := runningPod("ns", "web", func(p *apiv1.Pod) { p.Spec.NodeName = "n1" })
	other := runningPod("ns", "other", func(p *apiv1.Pod) { p.Spec.NodeName = "n4" })
	l := InstancePodsFromListers{Provider: provider, Nodes: nodes, Pods: podList{web, other}}
	got, err := l.PodsOn(context.Background(), []string{"fake:///zone/i1", "fake:///zone/i2", "fake:///zone/i3", "fake:///RG/zone/I4"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]NodePods{
		"fake:///zone/i1":    {Node: "n1", Pods: []*apiv1.Pod{web}},
		"fake:///zone/i2":    {Node: "n2"},
		"fake:///RG/zone/I4": {Node: "n4", Pods: []*apiv1.Pod{other}, Unsure: "its provider ID looks like the instance's"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pods on instances (-want +got):\n%s", diff)
	}

	// With a live reader, the pods come from it, not from the cache: a pod
	// bound after the cache's last update is seen.
	late := runningPod("ns", "late", func(p *apiv1.Pod) { p.Spec.NodeName = "n2" })
	l.Live = livePodList{late}
	got, err = l.PodsOn(context.Background(), []string{"fake:///zone/i2"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]NodePods{"fake:///zone/i2": {Node: "n2", Pods: []*apiv1.Pod{late}}}, got); diff != "" {
		t.Errorf("pods read live (-want +got):\n%s", diff)
	}
}

// A rollback keeps an instance whose Node runs another workload's pods
// also when the Node's provider ID is spelt otherwise than the instance's
// (the case differs, as Azure's resource groups do), and when the Node only
// may be the instance; an instance no Node may be goes.
func TestRollbackKeepsInstancesWhoseNodeIsSpeltOtherwise(t *testing.T) {
	ctx := context.Background()
	provider := fakeprovider.NewProvider()
	provider.AddNodeGroup("g", 0, 10, 0, nil)
	busy, spare, free := "fake:///RG/zone/I1", "fake:///RG/zone/I2", "fake:///zone/i3"
	for _, id := range []string{busy, spare, free} {
		provider.AddNode("g", nodeWithID("x", id))
	}
	nodes := nodeList{nodeWithID("n1", "fake:///rg/zone/i1"), nodeWithID("n2", "fake:///rg/zone/i2")}
	web := runningPod("other", "web", func(p *apiv1.Pod) { p.Spec.NodeName = "n1" })
	o := newOrchestrator(t, provider, nil)
	WithInstancePods(InstancePodsFromListers{Provider: provider, Nodes: nodes, Pods: podList{web}})(o)
	left, err := o.Rollback(ctx, map[string]Undo{"g": {Instances: []string{busy, spare, free}, Request: "ns/job"}}, "test")
	if err != nil {
		t.Fatal(err)
	}
	var deleted []string
	for _, c := range calls(provider, "ForceDeleteNodes") {
		deleted = append(deleted, c.Nodes...)
	}
	if diff := cmp.Diff([]string{"i3"}, deleted); diff != "" {
		t.Errorf("deleted (-want +got):\n%s", diff)
	}
	if rest := left["g"]; len(rest.Kept) != 2 || !strings.Contains(rest.Kept[busy], "node n1 may be this instance") ||
		!strings.Contains(rest.Kept[spare], "node n2 may be this instance") {
		t.Errorf("kept %v, want %s and %s kept with the reason", rest.Kept, busy, spare)
	}
}

type livePodList []*apiv1.Pod

func (l livePodList) PodsOnNode(_ context.Context, node string) ([]*apiv1.Pod, error) {
	var out []*apiv1.Pod
	for _, p := range l {
		if p.Spec.NodeName == node {
			out = append(out, p)
		}
	}
	return out, nil
}

type nodeList []*apiv1.Node

func (l nodeList) List(labels.Selector) ([]*apiv1.Node, error) { return l, nil }

type podList []*apiv1.Pod

func (l podList) List(labels.Selector) ([]*apiv1.Pod, error) { return l, nil }
