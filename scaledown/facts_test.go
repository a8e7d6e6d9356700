package scaledown

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/drain"
)

// factsWorld is a planner on a real snapshot (the loop's versioned path)
// over three nodes: a, the candidate, with pod pa (1 CPU, labelled
// app=guarded); b and c busy (not underutilised), b with room for pa.
type factsWorld struct {
	*verdictWorld
	p     *fakeprovider.Provider
	nodes []*apiv1.Node
	pods  map[string]*apiv1.Pod
	pdbs  cache.Indexer
	now   time.Time
}

func newFactsWorld(t *testing.T) *factsWorld {
	t.Helper()
	p := fakeprovider.NewProvider()
	p.AddNodeGroup("g", 0, 10, 0, nil)
	w := &factsWorld{verdictWorld: newVerdictWorld(t, p, DefaultOptions(), false), p: p, now: t0,
		pods: map[string]*apiv1.Pod{},
		pdbs: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})}
	w.planner.rules = drain.NewRules(drain.Options{},
		drain.Listers{PodDisruptionBudgets: policylisters.NewPodDisruptionBudgetLister(w.pdbs)})
	for _, name := range []string{"a", "b", "c"} {
		n := node(name)
		n.Status.Allocatable[apiv1.ResourcePods] = resource.MustParse("110")
		p.AddNode("g", n)
		w.nodes = append(w.nodes, n)
	}
	pa := pod("pa", "a", "1")
	pa.Labels = map[string]string{"app": "guarded"}
	w.pods["pa"], w.pods["pb"], w.pods["pc"] = pa, pod("pb", "b", "2500m"), pod("pc", "c", "3")
	return w
}

// plan runs one loop 10 s after the last, on the world's objects as they
// are now.
func (w *factsWorld) plan(t *testing.T) *Plan {
	t.Helper()
	w.now = w.now.Add(10 * time.Second)
	var pods []*apiv1.Pod
	for _, name := range sortedKeys(w.pods) {
		pods = append(pods, w.pods[name])
	}
	w.sess.h.Snapshot().Reset(w.nodes, pods)
	w.sess.next = 0
	if err := w.state.Update(context.Background(), w.p, w.nodes, w.now); err != nil {
		t.Fatal(err)
	}
	return w.planner.Update(context.Background(), Input{Now: w.now, Nodes: w.nodes, ScheduledPods: pods,
		State: w.state, Session: w.sess})
}

func (w *factsWorld) setPDB(t *testing.T, allowed int32, rv int) {
	t.Helper()
	b := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "guarded",
		UID: "pdb-guarded", ResourceVersion: strconv.Itoa(rv)},
		Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed}}
	if err := w.pdbs.Update(b); err != nil {
		t.Fatal(err)
	}
}

// A node kept RecentlyUnremovable whose own facts change (the pod that
// blocked it deleted, its PDB allowing a disruption now) is simulated in
// the next loop and found unneeded, not --unremovable-node-recheck-timeout
// later; one whose own facts did not change (the room elsewhere did, or
// nothing did) stays RecentlyUnremovable.
func TestRecheckEndsWhenTheNodesFactsChange(t *testing.T) {
	bare := pod("bare", "a", "100m")
	bare.OwnerReferences = nil // nothing recreates it: it blocks a
	for _, tc := range []struct {
		name string
		// block makes a unremovable in the first loop, change is what
		// happens before the second.
		block, change func(*testing.T, *factsWorld)
		want          string
	}{
		{"its blocking pod deleted",
			func(_ *testing.T, w *factsWorld) { w.pods["bare"] = bare },
			func(_ *testing.T, w *factsWorld) { delete(w.pods, "bare") },
			"unneeded, moves [pa]"},
		{"its PDB allows a disruption now",
			func(t *testing.T, w *factsWorld) { w.setPDB(t, 0, 1) },
			func(t *testing.T, w *factsWorld) { w.setPDB(t, 1, 2) },
			"unneeded, moves [pa]"},
		{"nothing changed",
			func(_ *testing.T, w *factsWorld) { w.pods["bare"] = bare },
			func(*testing.T, *factsWorld) {},
			ReasonRecentlyUnremovable},
		{"a neighbour's pod replaced",
			func(_ *testing.T, w *factsWorld) { w.pods["bare"] = bare },
			func(_ *testing.T, w *factsWorld) { w.pods["pc"] = pod("pc", "c", "3") },
			ReasonRecentlyUnremovable},
		{"a PDB of other pods changed",
			func(t *testing.T, w *factsWorld) {
				w.setPDB(t, 0, 1)
				other := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "other",
					UID: "pdb-other", ResourceVersion: "1"}, Spec: policyv1.PodDisruptionBudgetSpec{
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}}}
				if err := w.pdbs.Add(other); err != nil {
					t.Fatal(err)
				}
			},
			func(t *testing.T, w *factsWorld) {
				if err := w.pdbs.Delete(&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "default",
					Name: "other"}}); err != nil {
					t.Fatal(err)
				}
			},
			ReasonRecentlyUnremovable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newFactsWorld(t)
			tc.block(t, w)
			if got := verdictsOf(w.plan(t))["a"]; !strings.HasPrefix(got, ReasonBlockedByPod+": ") {
				t.Fatalf("first loop: a is %q, want %s", got, ReasonBlockedByPod)
			}
			tc.change(t, w)
			got, _, _ := strings.Cut(verdictsOf(w.plan(t))["a"], ":") // the reason without its detail
			if got != tc.want {
				t.Errorf("10 s later: a is %q, want %q", got, tc.want)
			}
		})
	}
}

// namingSession records the busy nodes each loop simulates, in order.
type namingSession struct {
	*session
	tried []string
}

func (s *namingSession) TryRemove(ctx context.Context, node string, move []*apiv1.Pod, avoid map[string]bool) bool {
	s.tried = append(s.tried, node)
	return s.session.TryRemove(ctx, node, move, avoid)
}

// blockedRotation is a fixture of n busy nodes whose pods fit nowhere, a
// pool of 2 and the recheck timeout off: every node stays a candidate and
// is simulated whenever the rotation draws it.
func blockedRotation(t *testing.T, n int) (*fixture, *namingSession, func(loop int) []string) {
	t.Helper()
	f := newFixture(t, 0, manyNodes(0, n), func(o *fixtureOptions) {
		o.ScaleDownNonEmptyCandidatesCount, o.ScaleDownCandidatesPoolMinCount, o.ScaleDownCandidatesPoolRatio = 30, 2, 0
		o.UnremovableNodeRecheckTimeout = 0
	})
	for name := range f.sess.real {
		f.sess.full[name] = true
	}
	s := &namingSession{session: f.sess}
	return f, s, func(loop int) []string {
		s.tried = nil
		now := t0.Add(time.Duration(loop) * 10 * time.Second)
		if err := f.state.Update(context.Background(), f.p, f.nodes, now); err != nil {
			t.Fatal(err)
		}
		f.planner.Update(context.Background(), Input{Now: now, Nodes: f.nodes, ScheduledPods: f.pods, State: f.state,
			Session: s})
		return s.tried
	}
}

// touchPod replaces the pod on node by a new object of the next
// resourceVersion, as an update delivered by the informers.
func touchPod(f *fixture, node string, rv int) {
	changed := pod("p-"+node, node, "1")
	changed.ResourceVersion = strconv.Itoa(rv)
	for i, p := range f.pods {
		if p.Name == changed.Name {
			f.pods[i] = changed
		}
	}
	f.sess.real[node] = []*apiv1.Pod{changed}
}

// With a pool smaller than the candidates, a node whose pods changed since
// its last simulation is drawn before the unchanged ones (which follow in
// the rotation's order).
func TestRotationDrawsChangedNodesFirst(t *testing.T) {
	f, _, loop := blockedRotation(t, 10)
	for i := range 5 { // every node simulated once, two a loop
		loop(i)
	}
	touchPod(f, "busy-06", 2)
	if diff := cmp.Diff([]string{"busy-06", "busy-00"}, loop(5)); diff != "" {
		t.Errorf("loop after busy-06's pod changed: simulated (-want +got):\n%s", diff)
	}
	// Nothing changed since: the rotation goes on after busy-00.
	if diff := cmp.Diff([]string{"busy-01", "busy-02"}, loop(6)); diff != "" {
		t.Errorf("quiet loop: simulated (-want +got):\n%s", diff)
	}
}

// Under a churn that changes pool-many other nodes every loop, an
// unchanged node is still simulated, at the latest staleAfter (the recheck
// timeout, or defaultStaleAfter when it is 0) plus ceil(nodes / pool) + 1
// loops after its last simulation.
func TestRotationDoesNotStarveUnchangedNodes(t *testing.T) {
	const n, pool, interval = 20, 2, 10 * time.Second
	f, _, loop := blockedRotation(t, n)
	bound := int(defaultStaleAfter/interval) + (n+pool-1)/pool + 1
	last := map[string]int{}
	rv := 1
	for i := range 150 {
		if i >= n/pool {
			// Two nodes other than busy-19 change every loop, ahead of
			// where the rotation goes on.
			for j := range pool {
				rv++
				touchPod(f, fmt.Sprintf("busy-%02d", (pool*i+j)%(n-1)), rv)
			}
		}
		for _, name := range loop(i) {
			last[name] = i
		}
		for k := range n {
			name := fmt.Sprintf("busy-%02d", k)
			if seen, ok := last[name]; ok && i-seen > bound {
				t.Fatalf("loop %d: %s last simulated in loop %d, more than %d loops ago", i, name, seen, bound)
			}
		}
	}
	if len(last) != n {
		t.Errorf("%d of %d nodes simulated", len(last), n)
	}
}
