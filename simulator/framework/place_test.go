package framework

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"
)

const extended = apiv1.ResourceName("example.com/foo")

// placeCase is one node, the pods already on it, and a group of equivalent
// pods to place there.
type placeCase struct {
	node     *apiv1.Node
	existing []*apiv1.Pod
	pods     []*apiv1.Pod
	room     bool // pass the HasRoom pre-check
}

func (c placeCase) String() string {
	p := c.pods[0]
	return fmt.Sprintf("node %v taints %d; %d existing; %d pods of %v (init %v, overhead %v, selector %v, tolerations %d); room %v",
		c.node.Status.Allocatable, len(c.node.Spec.Taints), len(c.existing), len(c.pods), p.Spec.Containers[0].Resources.Requests,
		len(p.Spec.InitContainers), p.Spec.Overhead, p.Spec.NodeSelector, len(p.Spec.Tolerations), c.room)
}

func quantity(r *rand.Rand, unit string, most int) resource.Quantity {
	return resource.MustParse(fmt.Sprintf("%d%s", r.IntN(most+1), unit))
}

// randomPlaceCase makes nodes that are roomy, tight, over-committed (pods
// whose requests exceed the allocatable), short of pod slots, tainted or
// labelled otherwise, and groups that request cpu, memory, ephemeral
// storage, an extended resource, nothing, or more in an init container or
// as overhead than in their containers.
func randomPlaceCase(r *rand.Rand, i int) placeCase {
	alloc := apiv1.ResourceList{
		apiv1.ResourceCPU:              quantity(r, "", 16),
		apiv1.ResourceMemory:           quantity(r, "Gi", 32),
		apiv1.ResourcePods:             quantity(r, "", 40),
		apiv1.ResourceEphemeralStorage: quantity(r, "Gi", 50),
	}
	if r.IntN(2) == 0 {
		alloc[extended] = quantity(r, "", 8)
	}
	node := makeNode(fmt.Sprintf("n%d", i), "1").Obj()
	node.Status.Allocatable, node.Status.Capacity = alloc, alloc
	node.Labels["pool"] = []string{"a", "b"}[r.IntN(2)]
	if r.IntN(5) == 0 {
		node = makeNode(node.Name, "1").Taint("dedicated").Label("pool", node.Labels["pool"]).Obj()
		node.Status.Allocatable, node.Status.Capacity = alloc, alloc
	}
	requests := func() apiv1.ResourceList {
		rl := apiv1.ResourceList{}
		if r.IntN(4) > 0 {
			rl[apiv1.ResourceCPU] = quantity(r, "m", 3000)
		}
		if r.IntN(3) > 0 {
			rl[apiv1.ResourceMemory] = quantity(r, "Mi", 6000)
		}
		if r.IntN(4) == 0 {
			rl[apiv1.ResourceEphemeralStorage] = quantity(r, "Gi", 10)
		}
		if r.IntN(4) == 0 {
			rl[extended] = quantity(r, "", 2)
		}
		return rl
	}
	c := placeCase{node: node, room: r.IntN(2) == 0}
	for j := range r.IntN(12) {
		p := makePod(fmt.Sprintf("e%d-%d", i, j), "0").On(node.Name).Obj()
		p.Spec.Containers[0].Resources.Requests = requests()
		c.existing = append(c.existing, p)
	}
	rep := makePod("rep", "0").Obj()
	rep.Spec.Containers[0].Resources.Requests = requests()
	if r.IntN(5) == 0 {
		rep.Spec.InitContainers = []apiv1.Container{{Name: "init", Resources: apiv1.ResourceRequirements{Requests: requests()}}}
	}
	if r.IntN(6) == 0 {
		rep.Spec.Overhead = apiv1.ResourceList{apiv1.ResourceCPU: quantity(r, "m", 500)}
	}
	if r.IntN(3) == 0 {
		rep.Spec.NodeSelector = map[string]string{"pool": "a"}
	}
	if r.IntN(2) == 0 {
		rep.Spec.Tolerations = []apiv1.Toleration{{Key: "dedicated", Operator: apiv1.TolerationOpExists}}
	}
	for j := range 1 + r.IntN(60) {
		p := rep.DeepCopy()
		p.Name = fmt.Sprintf("p%d-%d", i, j)
		p.UID = types.UID("uid-" + p.Name)
		c.pods = append(c.pods, p)
	}
	return c
}

// nodeState is what a placement leaves on a node, as the plugins see it.
type nodeState struct {
	Pods                      []string
	CPU, Memory, Ephemeral    int64
	Scalar                    map[apiv1.ResourceName]int64
	NonZeroCPU, NonZeroMemory int64
}

func stateOf(t *testing.T, s *Snapshot, node string) nodeState {
	t.Helper()
	ni, err := s.NodeInfo(node)
	if err != nil {
		t.Fatal(err)
	}
	st := nodeState{CPU: ni.Requested.MilliCPU, Memory: ni.Requested.Memory, Ephemeral: ni.Requested.EphemeralStorage,
		Scalar: map[apiv1.ResourceName]int64{}, NonZeroCPU: ni.NonZeroRequested.MilliCPU, NonZeroMemory: ni.NonZeroRequested.Memory}
	for k, v := range ni.Requested.ScalarResources {
		if v != 0 {
			st.Scalar[k] = v
		}
	}
	for _, p := range ni.Pods {
		st.Pods = append(st.Pods, p.GetPod().Name)
		if n := p.GetPod().Spec.NodeName; n != "" && n != node {
			t.Errorf("pod %s on node %s names node %s", p.GetPod().Name, node, n)
		}
	}
	return st
}

// placeByPod is the reference: each pod is offered to the node as the
// previous ones left it, after HasRoom when room is set.
func placeByPod(ctx context.Context, h *Handle, shape *PodShape, pods []*apiv1.Pod, node string, room *Request) int {
	check := h.Prepare(ctx, pods[0])
	for i, p := range pods {
		if (room != nil && !h.Snapshot().HasRoom(node, *room)) || check.Fits(ctx, node) != nil {
			return i
		}
		if err := h.Snapshot().AddPodShaped(shape, p, node); err != nil {
			panic(err)
		}
	}
	return len(pods)
}

// TestPlaceOnMatchesPodByPod compares PlaceOn with offering the pods one by
// one, on random nodes and groups, on the snapshot as loaded and inside a
// fork; and, with guesses that are wrong on purpose (too low, too high,
// random), that a wrong guess costs time, never a different result.
func TestPlaceOnMatchesPodByPod(t *testing.T) {
	s := NewSnapshot(nil, nil)
	h := newHandle(t, s)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(11, 40000))
	guessers := map[string]guesser{
		"resources": guessFit,
		"one":       func(*schedframework.NodeInfo, fwk.PodResource, *Request) int { return 1 },
		"all":       func(*schedframework.NodeInfo, fwk.PodResource, *Request) int { return 1 << 20 },
		"low": func(ni *schedframework.NodeInfo, res fwk.PodResource, room *Request) int {
			return guessFit(ni, res, room) - 2
		},
		"high": func(ni *schedframework.NodeInfo, res fwk.PodResource, room *Request) int {
			return guessFit(ni, res, room) + 3
		},
		"random": func(*schedframework.NodeInfo, fwk.PodResource, *Request) int { return r.IntN(30) },
	}
	counts := map[bool]int{} // cases where some pod fits, and where none does
	for i := range 300 {
		c := randomPlaceCase(r, i)
		shape, err := NewPodShape(c.pods[0])
		if err != nil {
			t.Fatal(err)
		}
		var room *Request
		if c.room {
			req := RequestOf(c.pods[0])
			room = &req
		}
		for _, forked := range []bool{false, true} {
			s.Reset([]*apiv1.Node{c.node}, c.existing)
			if forked {
				s.Fork()
			}
			ni, _ := s.NodeInfo(c.node.Name)
			guessed := guessFit(ni, shape.info.CalculateResource(), room)
			wantN := placeByPod(ctx, h, shape, c.pods, c.node.Name, room)
			want := stateOf(t, s, c.node.Name)
			counts[wantN > 0]++
			// With the default profile the guess is exact wherever a pod
			// fits: the plugins are asked three times, never pod by pod.
			if wantN > 0 && (guessed < wantN || (guessed > wantN && wantN < len(c.pods))) {
				t.Errorf("case %d (%v): guessed %d, the plugins take %d of %d", i, c, guessed, wantN, len(c.pods))
			}
			for name, guess := range guessers {
				s.Reset([]*apiv1.Node{c.node}, c.existing)
				if forked {
					s.Fork()
				}
				before := stateOf(t, s, c.node.Name)
				n, err := h.Prepare(ctx, c.pods[0]).placeOn(ctx, shape, c.pods, c.node.Name, room, guess)
				if err != nil {
					t.Fatal(err)
				}
				if n != wantN {
					t.Errorf("case %d (%v), forked %v, guess %s: placed %d, one by one %d", i, c, forked, name, n, wantN)
				}
				if diff := cmp.Diff(want, stateOf(t, s, c.node.Name)); diff != "" {
					t.Errorf("case %d (%v), forked %v, guess %s: node differs from one by one (-want +got):\n%s", i, c, forked, name, diff)
				}
				if forked {
					s.Revert()
					if diff := cmp.Diff(before, stateOf(t, s, c.node.Name)); diff != "" {
						t.Errorf("case %d, guess %s: Revert did not restore the node (-before +after):\n%s", i, name, diff)
					}
				}
			}
		}
	}
	if counts[true] < 100 || counts[false] < 50 {
		t.Errorf("the random cases are lopsided: %d where pods fit, %d where none does", counts[true], counts[false])
	}
}

// TestPlaceOnWhereTheGuessIsWrong: with NodeResourcesFit told to ignore an
// extended resource, the free-resource guess counts it and is too low; the
// plugins' answer wins.
func TestPlaceOnWhereTheGuessIsWrong(t *testing.T) {
	path := filepath.Join(t.TempDir(), "scheduler.yaml")
	cfg := `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: NodeResourcesFit
    args:
      ignoredResources: ["example.com/foo"]
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	node := makeNode("n", "8").Obj()
	node.Status.Allocatable[extended] = resource.MustParse("2")
	s := NewSnapshot([]*apiv1.Node{node}, nil)
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	h, err := New(t.Context(), s, factory, WithSchedulerConfigFile(path))
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(t.Context().Done())
	factory.WaitForCacheSync(t.Context().Done())
	ctx := context.Background()
	var pods []*apiv1.Pod
	for i := range 10 {
		p := makePod(fmt.Sprintf("p%d", i), "1").Obj()
		p.Spec.Containers[0].Resources.Requests[extended] = resource.MustParse("1")
		pods = append(pods, p)
	}
	shape, err := NewPodShape(pods[0])
	if err != nil {
		t.Fatal(err)
	}
	check := h.Prepare(ctx, pods[0])
	ni, _ := s.NodeInfo("n")
	if g := guessFit(ni, shape.info.CalculateResource(), nil); g != 2 {
		t.Fatalf("guess %d, want 2 (the extended resource)", g)
	}
	n, err := check.PlaceOn(ctx, shape, pods, "n", nil)
	if err != nil || n != 8 {
		t.Fatalf("placed %d (%v), want 8: the cpu, as the plugins ignore the extended resource", n, err)
	}
	if got := len(stateOf(t, s, "n").Pods); got != 8 {
		t.Errorf("the node holds %d pods, want 8", got)
	}
}

// TestPlacedPodsNeedNoBinding: pods placed by PlaceOn keep an empty node
// name; the plugins that look at the pods already on nodes (inter-pod
// affinity and anti-affinity, topology spread, resources) must judge other
// pods exactly as they do when the same pods are bound (AddPod).
func TestPlacedPodsNeedNoBinding(t *testing.T) {
	ctx := context.Background()
	nodes := func() []*apiv1.Node {
		return []*apiv1.Node{
			makeNode("n1", "8").Label("zone", "z1").Obj(),
			makeNode("n2", "8").Label("zone", "z2").Obj(),
		}
	}
	var web []*apiv1.Pod
	for i := range 3 {
		web = append(web, makePod(fmt.Sprintf("web-%d", i), "1").Label("app", "web").Obj())
	}
	bound, placed := NewSnapshot(nodes(), nil), NewSnapshot(nodes(), nil)
	hb, hp := newHandle(t, bound), newHandle(t, placed)
	for _, p := range web {
		if err := bound.AddPod(p, "n1"); err != nil {
			t.Fatal(err)
		}
	}
	shape, err := NewPodShape(web[0])
	if err != nil {
		t.Fatal(err)
	}
	if n, err := hp.Prepare(ctx, web[0]).PlaceOn(ctx, shape, web, "n1", nil); n != 3 || err != nil {
		t.Fatalf("placed %d (%v), want 3", n, err)
	}
	if pods, _ := placed.Pods("n1"); len(pods) != 3 || pods[0].Spec.NodeName != "" {
		t.Fatalf("n1 holds %d pods (first bound to %q), want the 3 pods as placed", len(pods), pods[0].Spec.NodeName)
	}
	spread := makePod("spread", "100m").Label("app", "web").Obj()
	spread.Spec.TopologySpreadConstraints = []apiv1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "kubernetes.io/hostname",
		WhenUnsatisfiable: apiv1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	near := makePod("near", "100m").Obj()
	near.Spec.Affinity = &apiv1.Affinity{PodAffinity: &apiv1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []apiv1.PodAffinityTerm{{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, TopologyKey: "zone"}}}}
	for _, tc := range []struct {
		pod  *apiv1.Pod
		want map[string]bool // node -> fits
	}{
		{pod: makePod("away", "100m").AntiAffinity("app", "web").Obj(), want: map[string]bool{"n1": false, "n2": true}},
		{pod: near, want: map[string]bool{"n1": true, "n2": false}},
		{pod: spread, want: map[string]bool{"n1": false, "n2": true}},
		{pod: makePod("big", "6").Obj(), want: map[string]bool{"n1": false, "n2": true}},
	} {
		for _, node := range []string{"n1", "n2"} {
			errB, errP := hb.CheckPod(ctx, tc.pod, node), hp.CheckPod(ctx, tc.pod, node)
			if (errB == nil) != tc.want[node] {
				t.Errorf("%s on %s with the pods bound: %v, want fits=%v", tc.pod.Name, node, errB, tc.want[node])
			}
			if (errP == nil) != (errB == nil) {
				t.Errorf("%s on %s: %v with the pods placed as they are, %v with them bound", tc.pod.Name, node, errP, errB)
			}
		}
	}
}

// TestPlaceOnPodsWithoutUID: pods without a UID cannot be taken back if the
// guess is too high, so they are offered one by one; the result is the same.
func TestPlaceOnPodsWithoutUID(t *testing.T) {
	s := NewSnapshot([]*apiv1.Node{makeNode("n", "4").Obj()}, nil)
	h := newHandle(t, s)
	ctx := context.Background()
	var pods []*apiv1.Pod
	for i := range 6 {
		p := makePod(fmt.Sprintf("p%d", i), "1").Obj()
		p.UID = ""
		pods = append(pods, p)
	}
	shape, err := NewPodShape(pods[0])
	if err != nil {
		t.Fatal(err)
	}
	tooHigh := func(*schedframework.NodeInfo, fwk.PodResource, *Request) int { return 6 }
	n, err := h.Prepare(ctx, pods[0]).placeOn(ctx, shape, pods, "n", nil, tooHigh)
	if err != nil || n != 4 {
		t.Fatalf("placed %d (%v), want 4", n, err)
	}
	if st := stateOf(t, s, "n"); len(st.Pods) != 4 || st.CPU != 4000 {
		t.Errorf("the node holds %v, %dm cpu; want 4 pods, 4000m", st.Pods, st.CPU)
	}
}
