package scaledown

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/estimator"
	"k8s.io/autoscaler/cluster-autoscaler/expander"
	"k8s.io/autoscaler/cluster-autoscaler/scaleup"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/drain"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

// schedWorld is a planner on the loop's real session (scaleup.Session on
// the scheduler framework), as the autoscaler runs it.
type schedWorld struct {
	planner *Planner
	orch    *scaleup.Orchestrator
	state   *clusterstate.Registry
}

func newSchedWorld(t *testing.T, p *fakeprovider.Provider, opts Options, off bool) *schedWorld {
	t.Helper()
	ctx := context.Background()
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	sim, err := framework.New(ctx, framework.NewSnapshot(nil, nil), factory)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	uo := scaleup.DefaultOptions()
	chain, err := expander.NewChain(ctx, uo.Expanders, expander.Deps{Random: func(int) int { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	so := clusterstate.DefaultOptions()
	so.NodeGroupDefaults = config.Defaults().NodeGroupDefaults
	state := clusterstate.NewRegistry(so)
	w := &schedWorld{planner: NewPlanner(opts, p, drain.NewRules(drain.Options{}, drain.Listers{}), NewTaints(nil, 0, false)),
		orch: scaleup.New(p, sim, estimator.New(sim), chain, uo, state), state: state}
	w.planner.verdicts.off = off
	return w
}

// schedCounting counts the removal simulations of the real session.
type schedCounting struct {
	*scaleup.Session
	tries int
}

func (c *schedCounting) TryRemove(ctx context.Context, node string, move []*apiv1.Pod, avoid map[string]bool) bool {
	c.tries++
	return c.Session.TryRemove(ctx, node, move, avoid)
}

func (c *schedCounting) TryRemoveWhy(ctx context.Context, node string, move []*apiv1.Pod, avoid map[string]bool) error {
	c.tries++
	return c.Session.TryRemoveWhy(ctx, node, move, avoid)
}

func (c *schedCounting) TryRemoveWalk(ctx context.Context, node string, move []*apiv1.Pod, avoid map[string]bool,
	w *framework.Walk) error {
	c.tries++
	return c.Session.TryRemoveWalk(ctx, node, move, avoid, w)
}

// TestVerdictsOnTheSchedulerFrameworkEqualFullSimulation is
// TestVerdictsKeptEqualFullSimulation on the real session and the
// scheduler's plugins, with the workloads whose checks read more than one
// node: host ports (node-local), required anti-affinity by zone, a hard
// topology spread constraint by zone, node taints. Over a seeded random
// stream, the planner that keeps outcomes (also while something changed
// elsewhere) must decide as the one that simulates every loop, and must
// have kept outcomes in loops where something changed.
func TestVerdictsOnTheSchedulerFrameworkEqualFullSimulation(t *testing.T) {
	rng := rand.New(rand.NewSource(4141))
	p := fakeprovider.NewProvider()
	p.AddNodeGroup("g", 0, 100, 0, nil)
	opts := DefaultOptions()
	opts.ScaleDownNonEmptyCandidatesCount, opts.UnremovableNodeRecheckTimeout = 0, 0
	cached, full := newSchedWorld(t, p, opts, false), newSchedWorld(t, p, opts, true)
	nodes := map[string]*apiv1.Node{}
	pods := map[string]*apiv1.Pod{}
	const nodeCount = 16
	newNode := func(name string) {
		n := node(name)
		cpu := []string{"2", "4", "8"}[rng.Intn(3)]
		n.Status.Allocatable = apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse(cpu),
			apiv1.ResourceMemory: resource.MustParse("16Gi"), apiv1.ResourcePods: resource.MustParse("110")}
		n.Status.Capacity = n.Status.Allocatable
		n.Labels = map[string]string{"zone": fmt.Sprintf("z%d", len(name)%3), "kubernetes.io/hostname": name}
		if rng.Intn(8) == 0 {
			n.Spec.Taints = []apiv1.Taint{{Key: "dedicated", Value: "x", Effect: apiv1.TaintEffectNoSchedule}}
		}
		if _, known := nodes[name]; !known {
			p.AddNode("g", n)
		}
		nodes[name] = n
	}
	// kind: 0-5 plain, 6 host port, 7 anti-affinity by zone, 8 spread by zone.
	newPod := func(name, on string, kind int) {
		pd := pod(name, on, []string{"300m", "700m", "1200m"}[rng.Intn(3)])
		pd.Labels = map[string]string{"app": "web"}
		switch kind {
		case 6:
			pd.Spec.Containers[0].Ports = []apiv1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: apiv1.ProtocolTCP}}
		case 7:
			pd.Labels = map[string]string{"app": "guard"}
			pd.Spec.Affinity = &apiv1.Affinity{PodAntiAffinity: &apiv1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []apiv1.PodAffinityTerm{{
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guard"}}, TopologyKey: "zone"}}}}
		case 8:
			pd.Labels = map[string]string{"app": "spread"}
			pd.Spec.TopologySpreadConstraints = []apiv1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone",
				WhenUnsatisfiable: apiv1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spread"}}}}
		}
		pods[name] = pd
	}
	for i := range nodeCount {
		newNode(fmt.Sprintf("n%02d", i))
	}
	for i := range 40 {
		newPod(fmt.Sprintf("p%03d", i), fmt.Sprintf("n%02d", rng.Intn(nodeCount)), rng.Intn(7))
	}
	seq := 40
	hits, localHits := 0, 0
	var tries [2]int
	now := t0
	ctx := context.Background()
	for loop := range 160 {
		// The anti-affinity pods come and go in phases: while one exists
		// no outcome is kept across a change.
		antiPhase := loop%60 >= 40
		switch ev := rng.Intn(16); {
		case ev < 8: // quiet
		case ev < 10: // a pod replaced
			names := sortedKeys(pods)
			name := names[rng.Intn(len(names))]
			newPod(name, pods[name].Spec.NodeName, rng.Intn(7))
		case ev < 12: // a pod added (now and then one spread by zone)
			kind := rng.Intn(7)
			if rng.Intn(4) == 0 {
				kind = 8
			}
			newPod(fmt.Sprintf("p%03d", seq), fmt.Sprintf("n%02d", rng.Intn(nodeCount)), kind)
			seq++
		case ev < 14: // a pod deleted
			names := sortedKeys(pods)
			delete(pods, names[rng.Intn(len(names))])
		default: // a node updated
			newNode(fmt.Sprintf("n%02d", rng.Intn(nodeCount)))
		}
		guard := fmt.Sprintf("guard-%d", loop/60)
		if antiPhase {
			if _, ok := pods[guard]; !ok {
				newPod(guard, fmt.Sprintf("n%02d", rng.Intn(nodeCount)), 7)
			}
		} else {
			delete(pods, fmt.Sprintf("guard-%d", loop/60-1))
			delete(pods, guard)
		}
		now = now.Add(10 * time.Second)
		var nodeList []*apiv1.Node
		for _, name := range sortedKeys(nodes) {
			nodeList = append(nodeList, nodes[name])
		}
		var podList []*apiv1.Pod
		for _, name := range sortedKeys(pods) {
			podList = append(podList, pods[name])
		}
		rng.Shuffle(len(podList), func(i, j int) { podList[i], podList[j] = podList[j], podList[i] })
		var got [2]map[string]string
		for i, w := range []*schedWorld{cached, full} {
			in := scaleup.Input{Now: now, Nodes: nodeList, ScheduledPods: podList}
			if err := w.state.Update(ctx, p, nodeList, now); err != nil {
				t.Fatal(err)
			}
			s := &schedCounting{Session: w.orch.Begin(ctx, in)}
			plan := w.planner.Update(ctx, Input{Now: now, Nodes: nodeList, ScheduledPods: podList, State: w.state, Session: s})
			tries[i] += s.tries
			got[i] = verdictsOf(plan)
		}
		hits += cached.planner.verdicts.hits
		localHits += cached.planner.verdicts.localHits
		if antiPhase && cached.planner.verdicts.localHits > 0 {
			t.Fatalf("loop %d: outcomes kept across a change while a pod with required anti-affinity exists", loop)
		}
		if diff := cmp.Diff(got[1], got[0]); diff != "" {
			t.Fatalf("loop %d: verdicts with kept outcomes differ from a full simulation (-full +kept):\n%s", loop, diff)
		}
	}
	if localHits == 0 {
		t.Fatal("no outcome was kept in a loop where something changed elsewhere")
	}
	if tries[0] >= tries[1] {
		t.Errorf("kept outcomes simulated %d removals, the full simulation %d: want fewer", tries[0], tries[1])
	}
	t.Logf("removal simulations: %d kept, %d full; %d outcomes kept, %d of them with changes elsewhere", tries[0], tries[1],
		hits, localHits)
}

// TestVerdictNotKeptWhenAPodReadsOtherNodes: node a's one pod s moves to b
// in the first loop. Then a pod appears on d, which s's removal never
// read, and s no longer fits on b: by a hard topology spread constraint
// (s counts the pods of its kind in b's zone, d's too), or by a required
// anti-affinity term of the new pod (it refuses s's kind in its zone).
// A kept outcome would say a is still removable.
func TestVerdictNotKeptWhenAPodReadsOtherNodes(t *testing.T) {
	for _, tc := range []struct {
		name string
		// s and the pod that appears on d.
		moved, appears func(*apiv1.Pod)
	}{
		{"hard topology spread of the moved pod", func(p *apiv1.Pod) {
			p.Labels = map[string]string{"app": "spread"}
			p.Spec.TopologySpreadConstraints = []apiv1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone",
				WhenUnsatisfiable: apiv1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spread"}}}}
		}, func(p *apiv1.Pod) { p.Labels = map[string]string{"app": "spread"} }},
		{"required anti-affinity of a pod elsewhere", func(p *apiv1.Pod) {
			p.Labels = map[string]string{"app": "web"}
		}, func(p *apiv1.Pod) {
			p.Spec.Affinity = &apiv1.Affinity{PodAntiAffinity: &apiv1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []apiv1.PodAffinityTerm{{
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, TopologyKey: "zone"}}}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, opts, nodes := fourNodes("z0", "z1", "z2", "z1")
			cached, full := newSchedWorld(t, p, opts, false), newSchedWorld(t, p, opts, true)
			s := pod("s", "a", "1")
			tc.moved(s)
			// b has room for s only; c and d are full but for 500m on d.
			pods := []*apiv1.Pod{s, pod("b1", "b", "2500m"), pod("c1", "c", "4"), pod("d1", "d", "3")}
			now := t0
			ctx := context.Background()
			plan := func(pods []*apiv1.Pod) (string, int) {
				now = now.Add(10 * time.Second)
				var got [2]string
				for i, w := range []*schedWorld{cached, full} {
					if err := w.state.Update(ctx, p, nodes, now); err != nil {
						t.Fatal(err)
					}
					sess := w.orch.Begin(ctx, scaleup.Input{Now: now, Nodes: nodes, ScheduledPods: pods})
					got[i] = verdictsOf(w.planner.Update(ctx, Input{Now: now, Nodes: nodes, ScheduledPods: pods,
						State: w.state, Session: sess}))["a"]
				}
				if got[0] != got[1] {
					t.Fatalf("a is %q with kept outcomes, %q simulated", got[0], got[1])
				}
				return got[0], cached.planner.verdicts.hits
			}
			if got, _ := plan(pods); got != "unneeded, moves [s]" {
				t.Fatalf("first loop: a is %q, want unneeded", got)
			}
			d2 := pod("d2", "d", "500m")
			tc.appears(d2)
			if got, _ := plan(append(pods, d2)); got != ReasonNoPlaceToMovePods && !strings.HasPrefix(got, ReasonNoPlaceToMovePods+":") {
				t.Fatalf("after d2 appeared: a is %q, want %s", got, ReasonNoPlaceToMovePods)
			}
		})
	}
}

// TestVerdictKeptWhenTheChangeIsElsewhere: the same cluster, the new pod on
// d plain (nothing reads across nodes): a's outcome is kept, without
// simulating, since its removal read b only.
func TestVerdictKeptWhenTheChangeIsElsewhere(t *testing.T) {
	p, opts, nodes := fourNodes()
	w := newSchedWorld(t, p, opts, false)
	pods := []*apiv1.Pod{pod("s", "a", "1"), pod("b1", "b", "2500m"), pod("c1", "c", "4"), pod("d1", "d", "3")}
	now := t0
	ctx := context.Background()
	plan := func(pods []*apiv1.Pod) (string, int, int) {
		now = now.Add(10 * time.Second)
		if err := w.state.Update(ctx, p, nodes, now); err != nil {
			t.Fatal(err)
		}
		sess := &schedCounting{Session: w.orch.Begin(ctx, scaleup.Input{Now: now, Nodes: nodes, ScheduledPods: pods})}
		got := verdictsOf(w.planner.Update(ctx, Input{Now: now, Nodes: nodes, ScheduledPods: pods, State: w.state,
			Session: sess}))["a"]
		return got, w.planner.verdicts.localHits, sess.tries
	}
	if got, _, _ := plan(pods); got != "unneeded, moves [s]" {
		t.Fatalf("first loop: a is %q, want unneeded", got)
	}
	got, kept, tries := plan(append(pods, pod("d2", "d", "500m")))
	if got != "unneeded, moves [s]" || kept != 1 || tries != 0 {
		t.Fatalf("after a pod appeared on d: a is %q, %d outcomes kept across the change, %d simulations; want unneeded, 1, 0",
			got, kept, tries)
	}
}

// TestVerdictAfterAnotherPodWentTheSameWay: a's pod is replaced by a larger
// one that still goes to b, where c's pod went after it: a's removal is
// simulated anew and lands as before, so the loop goes on keeping outcomes,
// but b is now fuller than when c's outcome was recorded, and c's pod no
// longer fits there: c must be simulated again.
func TestVerdictAfterAnotherPodWentTheSameWay(t *testing.T) {
	p, opts, nodes := fourNodes()
	cached, full := newSchedWorld(t, p, opts, false), newSchedWorld(t, p, opts, true)
	// b has 1.9 CPUs of room (above the threshold itself), d none.
	pods := []*apiv1.Pod{pod("pa", "a", "800m"), pod("pc", "c", "1"), pod("b1", "b", "2100m"), pod("d1", "d", "4")}
	now := t0
	ctx := context.Background()
	plan := func(pods []*apiv1.Pod) map[string]string {
		now = now.Add(10 * time.Second)
		var got [2]map[string]string
		for i, w := range []*schedWorld{cached, full} {
			if err := w.state.Update(ctx, p, nodes, now); err != nil {
				t.Fatal(err)
			}
			sess := w.orch.Begin(ctx, scaleup.Input{Now: now, Nodes: nodes, ScheduledPods: pods})
			got[i] = verdictsOf(w.planner.Update(ctx, Input{Now: now, Nodes: nodes, ScheduledPods: pods,
				State: w.state, Session: sess}))
		}
		if diff := cmp.Diff(got[1], got[0]); diff != "" {
			t.Fatalf("verdicts with kept outcomes differ from a full simulation (-full +kept):\n%s", diff)
		}
		return got[0]
	}
	if got := plan(pods); got["a"] != "unneeded, moves [pa]" || got["c"] != "unneeded, moves [pc]" {
		t.Fatalf("first loop: a is %q, c is %q; want both unneeded", got["a"], got["c"])
	}
	pods[0] = pod("pa", "a", "1")
	got := plan(pods)
	if got["a"] != "unneeded, moves [pa]" || !strings.HasPrefix(got["c"], ReasonNoPlaceToMovePods) {
		t.Fatalf("after a's pod grew: a is %q, c is %q; want a unneeded, c %s", got["a"], got["c"], ReasonNoPlaceToMovePods)
	}
}

// fourNodes returns a provider with one group of the nodes a, b, c and d
// (room for 110 pods each; with zones, the label zone of each in order)
// and scale-down's options that look at every candidate each loop.
func fourNodes(zones ...string) (*fakeprovider.Provider, Options, []*apiv1.Node) {
	p := fakeprovider.NewProvider()
	p.AddNodeGroup("g", 0, 10, 0, nil)
	opts := DefaultOptions()
	opts.ScaleDownNonEmptyCandidatesCount, opts.UnremovableNodeRecheckTimeout = 0, 0
	var nodes []*apiv1.Node
	for i, name := range []string{"a", "b", "c", "d"} {
		nd := node(name)
		nd.Status.Allocatable[apiv1.ResourcePods] = resource.MustParse("110")
		if i < len(zones) {
			nd.Labels = map[string]string{"zone": zones[i]}
		}
		p.AddNode("g", nd)
		nodes = append(nodes, nd)
	}
	return p, opts, nodes
}
