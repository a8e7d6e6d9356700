package framework

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podsOf is a node's pods by address, for comparing groupings without
// their order.
func podsOf(group []*apiv1.Pod) []*apiv1.Pod {
	out := slices.Clone(group)
	slices.SortFunc(out, func(a, b *apiv1.Pod) int {
		switch {
		case a == b:
			return 0
		case fmt.Sprintf("%p", a) < fmt.Sprintf("%p", b):
			return -1
		}
		return 1
	})
	return out
}

// The grouping kept from one call to the next is, at every call of a
// seeded random stream of pod events (new pods, pods deleted, pods
// replaced by a new object, bound or moved; node churn; a relist replacing
// every object; quiet calls; the list in another order each call), the
// grouping PodsByNode makes from scratch: the same nodes with the same pod
// objects. A call given the last call's objects returns the last grouping;
// any other returns PodsByNode's, order included.
func TestPodGroupsEqualPodsByNode(t *testing.T) {
	defer func(n int) { podGroupsNameSlack = n }(podGroupsNameSlack)
	podGroupsNameSlack = 8 // starts over after some node churn
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(seed, 41))
			store := map[string]*apiv1.Pod{}
			serial := 0
			nodes := 8
			newPod := func(name string) *apiv1.Pod {
				serial++
				p := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: fmt.Sprint(serial)}}
				if rnd.IntN(8) > 0 {
					p.Spec.NodeName = fmt.Sprintf("node-%d", rnd.IntN(nodes))
				}
				return p
			}
			for i := range 60 {
				name := fmt.Sprintf("pod-%d", i)
				store[name] = newPod(name)
			}
			var g podGroups
			var last map[string][]*apiv1.Pod
			var lastPods []*apiv1.Pod
			kept, regrouped, restarted := 0, 0, 0
			for step := range 400 {
				switch r := rnd.IntN(20); {
				case r < 6: // quiet
				case r < 10:
					for range 1 + rnd.IntN(3) {
						name := fmt.Sprintf("pod-%d", 1000+serial)
						store[name] = newPod(name)
					}
				case r < 13:
					for name := range store {
						if rnd.IntN(10) == 0 {
							delete(store, name)
						}
					}
				case r < 17:
					for name := range store {
						if rnd.IntN(10) == 0 {
							store[name] = newPod(name)
						}
					}
				case r < 19: // node churn: new names for new pods
					nodes += 5
				default: // relist: every object decoded anew
					for name, p := range store {
						c := p.DeepCopy()
						store[name] = c
					}
				}
				pods := make([]*apiv1.Pod, 0, len(store))
				for _, p := range store {
					pods = append(pods, p)
				}
				rnd.Shuffle(len(pods), func(i, j int) { pods[i], pods[j] = pods[j], pods[i] })
				restarts := g.slot != nil && len(g.names) > 2*len(g.last)+podGroupsNameSlack
				got, want := g.group(pods), PodsByNode(pods)
				if len(got) != len(want) {
					t.Fatalf("step %d: %d nodes, want %d", step, len(got), len(want))
				}
				for node, w := range want {
					if !slices.Equal(podsOf(got[node]), podsOf(w)) {
						t.Fatalf("step %d: node %s has %d pods, want %d (or other objects)", step, node, len(got[node]), len(w))
					}
				}
				same := last != nil && !restarts && slices.Equal(podsOf(pods), podsOf(lastPods))
				switch {
				case same:
					if reflect.ValueOf(got).Pointer() != reflect.ValueOf(last).Pointer() {
						t.Fatalf("step %d: the same pod objects were grouped again", step)
					}
					kept++
				default:
					for node, w := range want {
						if !slices.Equal(got[node], w) {
							t.Fatalf("step %d: node %s's pods not in the list's order", step, node)
						}
					}
					regrouped++
				}
				if restarts {
					restarted++
				}
				last, lastPods = got, pods
				if len(g.slot) != len(store) || len(g.entries)-len(g.free) != len(store) {
					t.Fatalf("step %d: %d pods known (%d entries, %d free), want %d", step, len(g.slot), len(g.entries),
						len(g.free), len(store))
				}
			}
			if kept < 50 || regrouped < 100 || restarted == 0 {
				t.Errorf("kept %d groupings, regrouped %d, started over %d times: the stream does not exercise all",
					kept, regrouped, restarted)
			}
		})
	}
}

// benchPods is n pods on n/10 nodes, each pod object allocated apart (as
// an informer's decoded objects are), in a shuffled order.
func benchPods(n int) []*apiv1.Pod {
	rnd := rand.New(rand.NewPCG(1, 2))
	pods := make([]*apiv1.Pod, n)
	for i := range pods {
		pods[i] = &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", i), Namespace: "default",
			Labels: map[string]string{"app": "web"}}, Spec: apiv1.PodSpec{NodeName: fmt.Sprintf("node-%d", i%(n/10))}}
	}
	rnd.Shuffle(len(pods), func(i, j int) { pods[i], pods[j] = pods[j], pods[i] })
	return pods
}

func BenchmarkPodsByNode10k(b *testing.B) {
	pods := benchPods(10000)
	for b.Loop() {
		PodsByNode(pods)
	}
}

func BenchmarkPodGroupsUnchanged10k(b *testing.B) {
	pods := benchPods(10000)
	var g podGroups
	g.group(pods)
	rnd := rand.New(rand.NewPCG(3, 4))
	for b.Loop() {
		b.StopTimer()
		rnd.Shuffle(len(pods), func(i, j int) { pods[i], pods[j] = pods[j], pods[i] })
		b.StartTimer()
		g.group(pods)
	}
}
