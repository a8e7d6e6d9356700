package scaleup

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/explain"
	"k8s.io/autoscaler/cluster-autoscaler/scaledown"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/drain"
)

// prioPod is a pod of its own ReplicaSet (named after it) requesting cpu,
// of priority prio, bound to node ("" for pending).
func prioPod(name, node, cpu string, prio int32) *apiv1.Pod {
	p := pendingPods(1, cpu)[0]
	p.Name, p.UID = name, types.UID("uid-"+name)
	p.OwnerReferences[0].Name, p.OwnerReferences[0].UID = "rs-"+name, types.UID("rs-"+name)
	p.Spec.Priority = &prio
	p.Spec.NodeName = node
	if node != "" {
		p.Status.Phase = apiv1.PodRunning
	}
	return p
}

// nominatedTo is a pending pod the scheduler nominated to node.
func nominatedTo(name, node, cpu string, prio int32) *apiv1.Pod {
	p := prioPod(name, "", cpu, prio)
	p.Status.NominatedNodeName = node
	p.Status.Conditions = []apiv1.PodCondition{{Type: apiv1.PodScheduled, Status: apiv1.ConditionFalse,
		Reason: apiv1.PodReasonUnschedulable}}
	return p
}

func nominatedNode(name string) *apiv1.Node {
	n := templateNode(name, "4")
	n.Labels["group"] = "g"
	n.CreationTimestamp = metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	return n
}

// TestNominatedPodsCountOnTheirNode: a pending pod the scheduler nominated
// to a node is placed there when it fits after the node's pods of lower
// priority are set aside; the scale-up then adds nothing for it, and the
// pods set aside stay on the node. Otherwise it is an ordinary pending pod.
func TestNominatedPodsCountOnTheirNode(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		node      func(*apiv1.Node) // changes n1 (cordon, taint)
		scheduled []*apiv1.Pod      // on n1
		pending   []*apiv1.Pod
		// onN1 are the pods of n1 in the session after the scale-up;
		// nominated and fit the Result's counts; added the nodes added.
		onN1           []string
		nominated, fit int
		added          int
	}{{
		name:      "fits once the lower-priority pod is preempted",
		scheduled: []*apiv1.Pod{prioPod("victim", "n1", "3", 0)},
		pending:   []*apiv1.Pod{nominatedTo("high", "n1", "3", 100)},
		onN1:      []string{"high", "victim"}, nominated: 1,
	}, {
		name:      "without a nomination the same pod scales up (the old behaviour for every pod)",
		scheduled: []*apiv1.Pod{prioPod("victim", "n1", "3", 0)},
		pending:   []*apiv1.Pod{prioPod("high", "", "3", 100)},
		onN1:      []string{"victim"}, added: 1,
	}, {
		name:      "does not fit even without the lower-priority pods",
		scheduled: []*apiv1.Pod{prioPod("higher", "n1", "2", 1000), prioPod("victim", "n1", "1", 0)},
		pending:   []*apiv1.Pod{nominatedTo("high", "n1", "3", 100)},
		onN1:      []string{"higher", "victim"}, added: 1,
	}, {
		name:      "pods of equal priority are not set aside",
		scheduled: []*apiv1.Pod{prioPod("peer", "n1", "3", 100)},
		pending:   []*apiv1.Pod{nominatedTo("high", "n1", "3", 100)},
		onN1:      []string{"peer"}, added: 1,
	}, {
		name:      "nominated node gone",
		scheduled: []*apiv1.Pod{prioPod("victim", "n1", "3", 0)},
		pending:   []*apiv1.Pod{nominatedTo("high", "n9", "3", 100)},
		onN1:      []string{"victim"}, added: 1,
	}, {
		name:      "nominated node cordoned",
		node:      func(n *apiv1.Node) { n.Spec.Unschedulable = true },
		scheduled: []*apiv1.Pod{prioPod("victim", "n1", "3", 0)},
		pending:   []*apiv1.Pod{nominatedTo("high", "n1", "3", 100)},
		onN1:      []string{"victim"}, added: 1,
	}, {
		name: "nominated node tainted",
		node: func(n *apiv1.Node) {
			n.Spec.Taints = []apiv1.Taint{{Key: "maintenance", Effect: apiv1.TaintEffectNoSchedule}}
		},
		scheduled: []*apiv1.Pod{prioPod("victim", "n1", "3", 0)},
		pending:   []*apiv1.Pod{nominatedTo("high", "n1", "3", 100)},
		onN1:      []string{"victim"}, added: 1,
	}, {
		name:      "two nominations to one node: the higher priority first, the other pending",
		scheduled: []*apiv1.Pod{prioPod("victim", "n1", "3", 0)},
		pending:   []*apiv1.Pod{nominatedTo("mid", "n1", "3", 50), nominatedTo("top", "n1", "3", 100)},
		onN1:      []string{"top", "victim"}, nominated: 1, added: 1,
	}, {
		// The victim's 2 free cores today are not free once the
		// nominated pod runs: the other pending pod does not take them.
		name:      "the victims' room is not counted twice",
		scheduled: []*apiv1.Pod{prioPod("victim", "n1", "2", 0)},
		pending:   []*apiv1.Pod{nominatedTo("high", "n1", "3", 100), prioPod("other", "", "2", 0)},
		onN1:      []string{"high", "victim"}, nominated: 1, added: 1,
	}, {
		name:      "an expendable nominated pod is not placed (nor scaled up for)",
		scheduled: []*apiv1.Pod{prioPod("victim", "n1", "3", -1000)},
		pending:   []*apiv1.Pod{nominatedTo("cheap", "n1", "3", -100)},
		onN1:      []string{"victim"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			provider := fakeprovider.NewProvider()
			provider.AddNodeGroup("g", 0, 10, 1, templateNode("g", "4"))
			n1 := nominatedNode("n1")
			if tc.node != nil {
				tc.node(n1)
			}
			provider.AddNode("g", n1)
			o := newOrchestrator(t, provider, nil)
			rec := explain.NewRecorder()
			o.explain = rec
			in := Input{Now: now, Nodes: []*apiv1.Node{n1}, ScheduledPods: tc.scheduled, Pending: tc.pending}
			if err := o.state.Update(ctx, provider, in.Nodes, now); err != nil {
				t.Fatal(err)
			}
			rec.BeginLoop(now)
			s := o.Begin(ctx, in)
			res := s.ScaleUp(ctx, in.Pending)
			rec.EndLoop()
			var on []string
			for _, p := range s.PodsOn("n1") {
				on = append(on, p.Name)
			}
			slices.Sort(on)
			if diff := cmp.Diff(tc.onN1, on); diff != "" {
				t.Errorf("pods on n1 (-want +got):\n%s", diff)
			}
			if res.Nominated != tc.nominated || res.FitExisting != tc.fit || s.Added() != tc.added {
				t.Errorf("nominated %d, fit existing %d, added %d; want %d, %d, %d", res.Nominated, res.FitExisting,
					s.Added(), tc.nominated, tc.fit, tc.added)
			}
			for _, p := range tc.pending {
				g, _, ok := rec.Pod(p.Namespace + "/" + p.Name)
				if counted := slices.Contains(on, p.Name); counted != (ok && g.Outcome == explain.OutcomeNominated) {
					t.Errorf("pod %s counted on n1 %v, explainer's record %+v (found %v)", p.Name, counted, g, ok)
				}
			}
		})
	}
}

// TestNominatedPodExplained: the explainer says where the pod was counted.
func TestNominatedPodExplained(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	provider := fakeprovider.NewProvider()
	provider.AddNodeGroup("g", 0, 10, 1, templateNode("g", "4"))
	n1 := nominatedNode("n1")
	provider.AddNode("g", n1)
	o := newOrchestrator(t, provider, nil)
	rec := explain.NewRecorder()
	o.explain = rec
	in := Input{Now: now, Nodes: []*apiv1.Node{n1}, ScheduledPods: []*apiv1.Pod{prioPod("victim", "n1", "3", 0)},
		Pending: []*apiv1.Pod{nominatedTo("high", "n1", "3", 100)}}
	if err := o.state.Update(ctx, provider, in.Nodes, now); err != nil {
		t.Fatal(err)
	}
	rec.BeginLoop(now)
	o.Begin(ctx, in).ScaleUp(ctx, in.Pending)
	rec.EndLoop()
	g, _, ok := rec.Pod("default/high")
	want := "nominated to node n1 by the scheduler: counted there, where it fits once the lower-priority pods " +
		"the scheduler preempts are gone; no scale-up for it"
	if !ok || g.Outcome != explain.OutcomeNominated || g.Message != want {
		t.Errorf("record %+v (found %v), want %q: %q", g, ok, explain.OutcomeNominated, want)
	}
}

// TestNominatedPodKeepsItsNodeFromScaleDown: a session begun for the
// scale-down alone (no pending pod reached the scale-up) still holds the
// nominated pod on its node, so the planner does not find the node
// unneeded although its only running pod (the victim) could move: the
// scheduler is about to run the nominated pod there.
func TestNominatedPodKeepsItsNodeFromScaleDown(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		pending  []*apiv1.Pod
		want     string // n1's unremovable reason
		unneeded bool
	}{
		{"nominated pod on n1", []*apiv1.Pod{nominatedTo("high", "n1", "3500m", 100)}, scaledown.ReasonBookedCapacity, false},
		{"no nomination", []*apiv1.Pod{prioPod("high", "", "3500m", 100)}, scaledown.ReasonNotUnneededLongEnough, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			provider := fakeprovider.NewProvider()
			provider.AddNodeGroup("g", 0, 10, 2, templateNode("g", "4"))
			n1, n2 := nominatedNode("n1"), nominatedNode("n2")
			provider.AddNode("g", n1)
			provider.AddNode("g", n2)
			nodes := []*apiv1.Node{n1, n2}
			// n1 runs the victim (1 core: under the utilisation threshold),
			// which n2 has room for; the nominated pod fits n2 nowhere.
			scheduled := []*apiv1.Pod{prioPod("victim", "n1", "1", 0), prioPod("busy", "n2", "2", 0)}
			o := newOrchestrator(t, provider, nil)
			opts := config.Defaults()
			client := fake.NewClientset()
			for _, n := range nodes {
				if _, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			planner := scaledown.NewPlanner(scaledown.DefaultOptions(), provider, drain.NewRules(drain.Options{}, drain.Listers{}),
				scaledown.NewTaints(client, opts.MaxBulkSoftTaintCount, false))
			if err := o.state.Update(ctx, provider, nodes, now); err != nil {
				t.Fatal(err)
			}
			s := o.Begin(ctx, Input{Now: now, Nodes: nodes, ScheduledPods: scheduled, Pending: tc.pending})
			plan := planner.Update(ctx, scaledown.Input{Now: now, Nodes: nodes, ScheduledPods: scheduled, State: o.state,
				Session: s})
			unneeded := false
			for _, c := range plan.Unneeded {
				unneeded = unneeded || c.Node.Name == "n1"
			}
			if got := plan.Unremovable["n1"]; got != tc.want || unneeded != tc.unneeded {
				t.Errorf("n1: unremovable %q, unneeded %v; want %q, %v", got, unneeded, tc.want, tc.unneeded)
			}
		})
	}
}
