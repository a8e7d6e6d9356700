package scaledown

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/drain"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

// snapSession simulates removals on a real snapshot, as *scaleup.Session
// does (fork, remove the node, place each pod on the first node with room
// from where the last one went, commit), and holds the framework Handle
// the planner reads the snapshot's facts through.
type snapSession struct {
	h     *framework.Handle
	next  int
	tries int
}

func (s *snapSession) Simulator() *framework.Handle { return s.h }

func (s *snapSession) PodsOn(node string) []*apiv1.Pod {
	pods, _ := s.h.Snapshot().Pods(node)
	return pods
}

func (s *snapSession) TryRemove(ctx context.Context, node string, move []*apiv1.Pod, avoid map[string]bool) bool {
	return s.TryRemoveWalk(ctx, node, move, avoid, nil) == nil
}

// TryRemoveWalk is TryRemove naming the nodes whose room it read; without
// walks (a session that is no WalkingSession) it is only TryRemove.
func (s *snapSession) TryRemoveWalk(_ context.Context, node string, move []*apiv1.Pod, avoid map[string]bool,
	w *framework.Walk) error {
	s.tries++
	snap := s.h.Snapshot()
	snap.Fork()
	if err := snap.RemoveNode(node); err != nil {
		snap.Revert()
		return err
	}
	names := snap.NodeNames()
	for _, p := range move {
		placed := false
		for i := range names {
			dest := names[(s.next+i)%len(names)]
			if dest == node || avoid[dest] {
				continue
			}
			if w != nil {
				w.Read = append(w.Read, dest)
			}
			if !snap.HasRoom(dest, framework.RequestOf(p)) {
				continue
			}
			cp := *p
			cp.Spec.NodeName = dest
			if snap.AddPod(&cp, dest) != nil {
				continue
			}
			s.next = (s.next + i) % len(names)
			if w != nil {
				w.Dest = append(w.Dest, dest)
			}
			placed = true
			break
		}
		if !placed {
			snap.Revert()
			return errNoRoom
		}
	}
	snap.Commit()
	return nil
}

var errNoRoom = errors.New("no room")

// verdictWorld is one planner with its own snapshot, fed the same stream.
type verdictWorld struct {
	planner *Planner
	sess    *snapSession
	state   *clusterstate.Registry
}

func newVerdictWorld(t *testing.T, p *fakeprovider.Provider, opts Options, off bool) *verdictWorld {
	t.Helper()
	h, err := framework.New(context.Background(), framework.NewSnapshot(nil, nil),
		informers.NewSharedInformerFactory(fake.NewClientset(), 0))
	if err != nil {
		t.Fatal(err)
	}
	rules := drain.NewRules(drain.Options{}, drain.Listers{})
	w := &verdictWorld{planner: NewPlanner(opts, p, rules, NewTaints(nil, 0, false)), sess: &snapSession{h: h}}
	w.planner.verdicts.off = off
	so := clusterstate.DefaultOptions()
	so.NodeGroupDefaults = config.Defaults().NodeGroupDefaults
	w.state = clusterstate.NewRegistry(so)
	return w
}

// verdictsOf is what the test compares: every node's verdict and the pods
// each unneeded node would move.
func verdictsOf(plan *Plan) map[string]string {
	out := map[string]string{}
	for n, r := range plan.Unremovable {
		out[n] = r
		if d := plan.Details[n]; d != "" {
			out[n] += ": " + d
		}
	}
	for _, c := range plan.Unneeded {
		var move []string
		for _, p := range c.Move {
			move = append(move, p.Name)
		}
		out[c.Node.Name] = fmt.Sprintf("unneeded, moves %v", move)
	}
	return out
}

// TestVerdictsKeptEqualFullSimulation runs two planners over one seeded
// random stream of node and pod changes (new objects, as the informers
// deliver them, and quiet loops in between): one keeps the last loop's
// removal outcomes, the other simulates every loop from scratch. Their
// verdicts must be the same in every loop, and the first must have kept
// outcomes in quiet loops.
func TestVerdictsKeptEqualFullSimulation(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts func(*Options)
		// keeps: whether outcomes must be kept (the rotation draws other
		// nodes every loop, so its chain of simulations differs).
		keeps bool
	}{
		{"all candidates, no recheck timeout", func(o *Options) {
			o.ScaleDownNonEmptyCandidatesCount, o.UnremovableNodeRecheckTimeout = 0, 0
		}, true},
		{"rotation pool", func(o *Options) {
			o.ScaleDownNonEmptyCandidatesCount, o.ScaleDownCandidatesPoolMinCount, o.UnremovableNodeRecheckTimeout = 2, 3, 0
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(41))
			const pods0 = 44 // about 70% of the nodes' cpu: room is scarce
			p := fakeprovider.NewProvider()
			p.AddNodeGroup("g", 0, 100, 0, nil)
			opts := DefaultOptions()
			tc.opts(&opts)
			cached, full := newVerdictWorld(t, p, opts, false), newVerdictWorld(t, p, opts, true)
			nodes := map[string]*apiv1.Node{}
			pods := map[string]*apiv1.Pod{}
			newNode := func(name string) {
				n := node(name)
				cpu := []string{"2", "4", "8"}[rng.Intn(3)]
				n.Status.Allocatable = apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse(cpu),
					apiv1.ResourceMemory: resource.MustParse("16Gi"), apiv1.ResourcePods: resource.MustParse("110")}
				n.Status.Capacity = n.Status.Allocatable
				if _, known := nodes[name]; !known {
					p.AddNode("g", n)
				}
				nodes[name] = n
			}
			newPod := func(name, on string) {
				pods[name] = pod(name, on, []string{"300m", "700m", "1200m", "1800m"}[rng.Intn(4)])
			}
			for i := range 14 {
				newNode(fmt.Sprintf("n%02d", i))
			}
			for i := range pods0 {
				newPod(fmt.Sprintf("p%03d", i), fmt.Sprintf("n%02d", rng.Intn(14)))
			}
			podSeq := pods0
			hits, localHits := 0, 0
			var movable [2]int
			now := t0
			for loop := range 150 {
				switch ev := rng.Intn(16); {
				case ev < 10: // quiet
				case ev < 12: // a pod replaced (new object, maybe another size)
					names := sortedKeys(pods)
					name := names[rng.Intn(len(names))]
					newPod(name, pods[name].Spec.NodeName)
				case ev < 13: // a pod added
					newPod(fmt.Sprintf("p%03d", podSeq), fmt.Sprintf("n%02d", rng.Intn(14)))
					podSeq++
				case ev < 14: // a pod deleted
					names := sortedKeys(pods)
					delete(pods, names[rng.Intn(len(names))])
				case ev < 15: // a node updated (new object, maybe another size)
					newNode(fmt.Sprintf("n%02d", rng.Intn(14)))
				default: // a node added between others: the later ones move in the snapshot's list
					newNode(fmt.Sprintf("n%02d+%d", rng.Intn(14), loop))
				}
				now = now.Add(10 * time.Second)
				nodeList := make([]*apiv1.Node, 0, len(nodes))
				for _, name := range sortedKeys(nodes) {
					nodeList = append(nodeList, nodes[name])
				}
				podList := make([]*apiv1.Pod, 0, len(pods))
				for _, name := range sortedKeys(pods) {
					podList = append(podList, pods[name])
				}
				// The informers' order: not the same from one loop to the next.
				rng.Shuffle(len(podList), func(i, j int) { podList[i], podList[j] = podList[j], podList[i] })
				var got [2]map[string]string
				for i, w := range []*verdictWorld{cached, full} {
					w.sess.h.Snapshot().Reset(nodeList, podList)
					w.sess.next = 0 // a new session each loop, as scaleup.Orchestrator.Begin makes
					if err := w.state.Update(context.Background(), p, nodeList, now); err != nil {
						t.Fatal(err)
					}
					plan := w.planner.Update(context.Background(), Input{Now: now, Nodes: nodeList,
						ScheduledPods: podList, State: w.state, Session: w.sess})
					got[i] = verdictsOf(plan)
					for _, v := range got[i] {
						if strings.HasPrefix(v, "unneeded, moves [p") {
							movable[i]++
						}
					}
				}
				hits += cached.planner.verdicts.hits
				localHits += cached.planner.verdicts.localHits
				if diff := cmp.Diff(got[1], got[0]); diff != "" {
					t.Fatalf("loop %d: verdicts with kept outcomes differ from a full simulation (-full +kept):\n%s", loop, diff)
				}
			}
			if tc.keeps && hits == 0 {
				t.Fatal("no outcome was kept from one loop to the next")
			}
			if tc.keeps && cached.sess.tries >= full.sess.tries {
				t.Errorf("kept outcomes simulated %d removals, the full simulation %d: want fewer", cached.sess.tries, full.sess.tries)
			}
			t.Logf("simulations: %d kept, %d full; %d outcomes kept (%d with changes elsewhere); %d verdicts of unneeded nodes with pods",
				cached.sess.tries, full.sess.tries, hits, localHits, movable[0])
		})
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestVerdictKeptOnlyWhileTheRoomIsUnchanged: node a's pod fits on b in the
// first loop; then b gets a pod (a new pod object on b, a unchanged) and a's
// pod fits nowhere: the outcome of the first loop must not be kept. A third,
// quiet loop keeps the second's outcome.
func TestVerdictKeptOnlyWhileTheRoomIsUnchanged(t *testing.T) {
	p := fakeprovider.NewProvider()
	p.AddNodeGroup("g", 0, 10, 0, nil)
	opts := DefaultOptions()
	opts.ScaleDownNonEmptyCandidatesCount, opts.UnremovableNodeRecheckTimeout = 0, 0
	w := newVerdictWorld(t, p, opts, false)
	a, b := node("a"), node("b") // 4 CPU each
	for _, n := range []*apiv1.Node{a, b} {
		n.Status.Allocatable[apiv1.ResourcePods] = resource.MustParse("110")
	}
	p.AddNode("g", a)
	p.AddNode("g", b)
	nodes := []*apiv1.Node{a, b}
	pods := []*apiv1.Pod{pod("pa", "a", "1"), pod("pb", "b", "2500m")}
	now := t0
	plan := func(pods []*apiv1.Pod) map[string]string {
		now = now.Add(10 * time.Second)
		w.sess.h.Snapshot().Reset(nodes, pods)
		w.sess.next = 0
		if err := w.state.Update(context.Background(), p, nodes, now); err != nil {
			t.Fatal(err)
		}
		return verdictsOf(w.planner.Update(context.Background(), Input{Now: now, Nodes: nodes, ScheduledPods: pods,
			State: w.state, Session: w.sess}))
	}
	if got := plan(pods)["a"]; got != "unneeded, moves [pa]" {
		t.Fatalf("first loop: a is %q, want unneeded", got)
	}
	pods = append(pods, pod("pb2", "b", "1"))
	if got := plan(pods)["a"]; got != ReasonNoPlaceToMovePods {
		t.Fatalf("after b filled up: a is %q, want %s", got, ReasonNoPlaceToMovePods)
	}
	before := w.sess.tries
	if got := plan(pods)["a"]; got != ReasonNoPlaceToMovePods || w.planner.verdicts.hits != 1 || w.sess.tries != before {
		t.Fatalf("quiet loop: a is %q with %d outcomes kept and %d simulations, want %s kept without simulating",
			got, w.planner.verdicts.hits, w.sess.tries-before, ReasonNoPlaceToMovePods)
	}
}
