package scaleup

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/estimator"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

// placeOneByOne is the reference for fitGroups: every pod of a group is
// offered to the nodes in order, each after the previous one was placed,
// HasRoom first, then the Filter plugins.
func placeOneByOne(ctx context.Context, o *Orchestrator, groups []*estimator.Group, realOnly bool) []*apiv1.Pod {
	snap := o.sim.Snapshot()
	var rest []*apiv1.Pod
	for _, g := range groups {
		req := framework.RequestOf(g.Representative())
		check := o.sim.Prepare(ctx, g.Representative())
		for _, p := range g.Pods {
			placed := false
			for _, node := range snap.NodeNames() {
				if realOnly && strings.HasPrefix(node, upcomingPrefix) {
					continue
				}
				if snap.HasRoom(node, req) && check.Fits(ctx, node) == nil {
					if err := snap.AddPod(p, node); err != nil {
						panic(err)
					}
					placed = true
					break
				}
			}
			if !placed {
				rest = append(rest, p)
			}
		}
	}
	return rest
}

// placement is where the snapshot has each pending pod, and the pods left.
func placement(t *testing.T, o *Orchestrator, rest []*apiv1.Pod) (map[string][]string, []string) {
	t.Helper()
	snap := o.sim.Snapshot()
	out := map[string][]string{}
	for _, node := range snap.NodeNames() {
		pods, err := snap.Pods(node)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods {
			if p.Spec.NodeName != "" && p.Spec.NodeName != node {
				t.Errorf("pod %s on node %s is bound to %q", p.Name, node, p.Spec.NodeName)
			}
			if strings.HasPrefix(p.Name, "g") {
				out[node] = append(out[node], p.Name)
			}
		}
	}
	var left []string
	for _, p := range rest {
		left = append(left, p.Name)
	}
	sort.Strings(left)
	return out, left
}

// randomCluster is registered and upcoming nodes of a few shapes, some
// running pods, and a few groups of pending pods, some of which must go pod
// by pod (host ports).
func randomCluster(r *rand.Rand) ([]*apiv1.Node, []*apiv1.Pod, [][]*apiv1.Pod) {
	var nodes []*apiv1.Node
	var running []*apiv1.Pod
	for i := range 3 + r.IntN(30) {
		name := fmt.Sprintf("node-%d", i)
		if r.IntN(4) == 0 {
			name = fmt.Sprintf("%sgroup-%d", upcomingPrefix, i)
		}
		n := templateNode(name, fmt.Sprint(1+r.IntN(16)))
		n.Labels["pool"] = []string{"a", "b"}[r.IntN(2)]
		n.Status.Allocatable[apiv1.ResourcePods] = resource.MustParse(fmt.Sprint(1 + r.IntN(30)))
		if r.IntN(6) == 0 {
			n.Spec.Taints = []apiv1.Taint{{Key: "dedicated", Effect: apiv1.TaintEffectNoSchedule}}
		}
		nodes = append(nodes, n)
		for j := range r.IntN(5) {
			p := pendingPods(1, fmt.Sprintf("%dm", r.IntN(4000)))[0]
			p.Name = fmt.Sprintf("run-%d-%d", i, j)
			p.UID = types.UID(p.Name)
			p.Spec.NodeName = name
			running = append(running, p)
		}
	}
	var sets [][]*apiv1.Pod
	for g := range 1 + r.IntN(4) {
		pods := requestPods(1+r.IntN(150), fmt.Sprintf("%dm", 100*(1+r.IntN(30))), fmt.Sprintf("%dMi", 256*r.IntN(16)))
		for i, p := range pods {
			p.Name = fmt.Sprintf("g%d-%d", g, i)
			p.UID = types.UID(p.Name)
		}
		spec := pods[0].Spec.DeepCopy()
		spec.NodeSelector = nil
		if r.IntN(2) == 0 {
			spec.NodeSelector = map[string]string{"pool": "a"}
		}
		if r.IntN(3) == 0 {
			spec.Containers[0].Ports = []apiv1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: apiv1.ProtocolTCP}}
		}
		if r.IntN(3) == 0 {
			spec.Tolerations = []apiv1.Toleration{{Key: "dedicated", Operator: apiv1.TolerationOpExists}}
		}
		for _, p := range pods {
			p.Spec = *spec
		}
		sets = append(sets, pods)
	}
	return nodes, running, sets
}

// TestPlaceMatchesPodByPod: placing groups by counting (fitGroups, through
// Place) leaves every pod where offering them one by one does, on random
// clusters with upcoming nodes, with and without realOnly.
func TestPlaceMatchesPodByPod(t *testing.T) {
	ctx := context.Background()
	o := newOrchestrator(t, fakeprovider.NewProvider(), nil)
	s := &Session{o: o}
	r := rand.New(rand.NewPCG(4000, 40000))
	placedSome := 0
	for i := range 200 {
		nodes, running, sets := randomCluster(r)
		realOnly := r.IntN(2) == 0
		o.sim.Snapshot().Reset(nodes, running)
		want, wantLeft := placement(t, o, placeOneByOne(ctx, o, o.groupsOf(sets), realOnly))
		o.sim.Snapshot().Reset(nodes, running)
		got, gotLeft := placement(t, o, s.Place(ctx, sets, realOnly))
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("case %d (realOnly %v): placements differ (-one by one +Place):\n%s", i, realOnly, diff)
		}
		if diff := cmp.Diff(wantLeft, gotLeft); diff != "" {
			t.Errorf("case %d (realOnly %v): pods left differ (-one by one +Place):\n%s", i, realOnly, diff)
		}
		if len(want) > 0 {
			placedSome++
		}
	}
	if placedSome < 100 {
		t.Errorf("only %d of 200 random clusters took any pod", placedSome)
	}
}

// TestBookingHoldsCapacity: booked pods, placed by counting, take their
// room: an ordinary pod no longer fits, FitAll of more is refused and
// leaves nothing behind, and every node shows the pods booked on it (what
// scale-down reads to keep the node, BookedCapacity).
func TestBookingHoldsCapacity(t *testing.T) {
	ctx := context.Background()
	provider, nodes := bookingCluster(50, "10")
	o := newOrchestrator(t, provider, nil)
	in := Input{Now: time.Now(), Nodes: nodes}
	if err := o.state.Update(ctx, provider, nodes, in.Now); err != nil {
		t.Fatal(err)
	}
	s := o.Begin(ctx, in)
	booked := requestPods(500, "1", "1Gi")
	if rest := s.Place(ctx, [][]*apiv1.Pod{booked}, true); len(rest) != 0 {
		t.Fatalf("%d booked pods left over, want none", len(rest))
	}
	for _, n := range nodes {
		if got := len(s.PodsOn(n.Name)); got != 10 {
			t.Errorf("node %s shows %d pods, want the 10 booked there", n.Name, got)
		}
	}
	other := requestPods(1, "1", "1Gi")
	other[0].Name, other[0].UID, other[0].OwnerReferences = "other", "other", nil
	if fit, _ := s.FitAll(ctx, [][]*apiv1.Pod{other}, false); fit {
		t.Error("a pod fits nodes full of booked pods")
	}
	if res := s.ScaleUp(ctx, other); res.FitExisting != 0 {
		t.Errorf("the ordinary scale-up placed %d pods on booked capacity", res.FitExisting)
	}
	for _, n := range nodes {
		if got := len(s.PodsOn(n.Name)); got != 10 {
			t.Errorf("after a refused FitAll node %s shows %d pods, want 10", n.Name, got)
		}
	}
}
