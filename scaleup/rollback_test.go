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
	"k8s.io/autoscaler/cluster-autoscaler/provreq"
)

// podsByInstance is InstancePods from a fixed answer.
type podsByInstance struct {
	pods map[string]NodePods
	err  error
}

func (p podsByInstance) PodsOn([]string) (map[string]NodePods, error) { return p.pods, p.err }

func runningPod(ns, name string, mutate func(*apiv1.Pod)) *apiv1.Pod {
	p := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Status: apiv1.PodStatus{Phase: apiv1.PodRunning}}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func consumes(request string) func(*apiv1.Pod) {
	return func(p *apiv1.Pod) { p.Annotations = map[string]string{provreq.ConsumeAnnotation: request} }
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

// The listers' answer: the Node whose provider ID is the instance's, and
// the pods bound to it.
func TestInstancePodsFromListers(t *testing.T) {
	nodes := nodeList{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: apiv1.NodeSpec{ProviderID: "fake:///i1"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "n2"}, Spec: apiv1.NodeSpec{ProviderID: "fake:///i2"}}}
	web := runningPod("ns", "web", func(p *apiv1.Pod) { p.Spec.NodeName = "n1" })
	other := runningPod("ns", "other", func(p *apiv1.Pod) { p.Spec.NodeName = "n2" })
	got, err := InstancePodsFromListers{Nodes: nodes, Pods: podList{web, other}}.PodsOn([]string{"fake:///i1", "fake:///i3"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]NodePods{"fake:///i1": {Node: "n1", Pods: []*apiv1.Pod{web}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pods on instances (-want +got):\n%s", diff)
	}
}

type nodeList []*apiv1.Node

func (l nodeList) List(labels.Selector) ([]*apiv1.Node, error) { return l, nil }

type podList []*apiv1.Pod

func (l podList) List(labels.Selector) ([]*apiv1.Pod, error) { return l, nil }
