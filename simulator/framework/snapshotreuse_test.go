package framework

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"
)

// reuseWorld is the informers' view the equivalence test changes event by
// event: every change replaces the object (a new pointer), as an informer
// does; an object not changed keeps its pointer.
type reuseWorld struct {
	rnd    *rand.Rand
	nodes  map[string]*apiv1.Node
	pods   map[string]*apiv1.Pod
	dra    *fakeDRA
	serial int
}

func (w *reuseWorld) nodeNames() []string {
	out := make([]string, 0, len(w.nodes))
	for n := range w.nodes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (w *reuseWorld) podNames(bound bool) []string {
	var out []string
	for k, p := range w.pods {
		if (p.Spec.NodeName != "") == bound {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func pick[T any](rnd *rand.Rand, xs []T) (T, bool) {
	var zero T
	if len(xs) == 0 {
		return zero, false
	}
	return xs[rnd.IntN(len(xs))], true
}

// newNode is a node of a random size, half of them with a GPU slice.
func (w *reuseWorld) newNode(name string) *apiv1.Node {
	return makeNode(name, fmt.Sprint(4+w.rnd.IntN(8))).Label("zone", fmt.Sprint("z", w.rnd.IntN(2))).Obj()
}

// newPod is a pod of one of the kinds the snapshot treats apart: plain,
// host port, pod affinity, required anti-affinity, a PersistentVolumeClaim,
// a ResourceClaim of the cluster's, a claim from a template.
func (w *reuseWorld) newPod(name string) *apiv1.Pod {
	b := makePod(name, []string{"100m", "250m", "500m"}[w.rnd.IntN(3)]).Label("app", fmt.Sprint("a", w.rnd.IntN(3)))
	switch w.rnd.IntN(8) {
	case 1:
		b.HostPort(int32(8080 + w.rnd.IntN(3)))
	case 2:
		b.AntiAffinity("app", fmt.Sprint("a", w.rnd.IntN(3)))
	case 3:
		p := b.Obj()
		p.Spec.Affinity = &apiv1.Affinity{PodAffinity: &apiv1.PodAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []apiv1.WeightedPodAffinityTerm{{Weight: 1,
				PodAffinityTerm: apiv1.PodAffinityTerm{TopologyKey: "zone",
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a0"}}}}}}}
	case 4:
		b.Claim(fmt.Sprint("pvc-", w.rnd.IntN(4)))
	case 5:
		p := b.Obj()
		claim := fmt.Sprint("claim-", w.rnd.IntN(3))
		p.Spec.ResourceClaims = []apiv1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claim}}
	case 6:
		return templatePod(name)
	}
	return b.Obj()
}

// step applies one random informer event.
func (w *reuseWorld) step() string {
	w.serial++
	switch k := w.rnd.IntN(100); {
	case k < 8:
		name := fmt.Sprint("n-", w.serial)
		w.nodes[name] = w.newNode(name)
		return "add node " + name
	case k < 14:
		name, ok := pick(w.rnd, w.nodeNames())
		if !ok {
			return "none"
		}
		n := w.nodes[name].DeepCopy() // an update that changed nothing the snapshot reads
		if w.rnd.IntN(2) == 0 {
			n = w.newNode(name)
		}
		w.nodes[name] = n
		return "update node " + name
	case k < 18:
		name, ok := pick(w.rnd, w.nodeNames())
		if !ok {
			return "none"
		}
		delete(w.nodes, name) // its pods stay, naming a node the snapshot lacks
		return "delete node " + name
	case k < 40:
		name := fmt.Sprint("p-", w.serial)
		p := w.newPod(name)
		if node, ok := pick(w.rnd, w.nodeNames()); ok && w.rnd.IntN(3) > 0 {
			p.Spec.NodeName = node
		}
		w.pods[name] = p
		return "add pod " + name
	case k < 58:
		name, ok := pick(w.rnd, w.podNames(true))
		if !ok {
			return "none"
		}
		old := w.pods[name]
		p := old.DeepCopy()
		if w.rnd.IntN(2) == 0 {
			p = w.newPod(name)
			p.Spec.NodeName = old.Spec.NodeName
		}
		w.pods[name] = p
		return "update pod " + name
	case k < 76:
		name, ok := pick(w.rnd, w.podNames(false))
		node, ok2 := pick(w.rnd, w.nodeNames())
		if !ok || !ok2 {
			return "none"
		}
		p := w.pods[name].DeepCopy()
		p.Spec.NodeName = node
		w.pods[name] = p
		return "bind pod " + name + " to " + node
	case k < 92:
		name, ok := pick(w.rnd, append(w.podNames(true), w.podNames(false)...))
		if !ok {
			return "none"
		}
		delete(w.pods, name)
		return "delete pod " + name
	default:
		// The DRA objects change: a claim is replaced or a slice comes or goes.
		w.dra.claims = slices.Clone(w.dra.claims)
		i := w.rnd.IntN(len(w.dra.claims))
		c := w.dra.claims[i].DeepCopy()
		if c.Status.Allocation == nil {
			c.Status.Allocation = &resourceapi.AllocationResult{}
		} else {
			c.Status.Allocation = nil
		}
		w.dra.claims[i] = c
		if node, ok := pick(w.rnd, w.nodeNames()); ok {
			w.dra.slices = append(slices.Clone(w.dra.slices), gpuSlice(node, "gpu-0"))
		}
		return "change DRA objects"
	}
}

// lists returns the nodes in name order and the pods in a random order (the
// informers' List order is a map's).
func (w *reuseWorld) lists() ([]*apiv1.Node, []*apiv1.Pod) {
	var nodes []*apiv1.Node
	for _, n := range w.nodeNames() {
		nodes = append(nodes, w.nodes[n])
	}
	var pods []*apiv1.Pod
	for _, k := range append(w.podNames(true), w.podNames(false)...) {
		pods = append(pods, w.pods[k])
	}
	w.rnd.Shuffle(len(pods), func(i, j int) { pods[i], pods[j] = pods[j], pods[i] })
	return nodes, pods
}

// snapshotChange is a change a loop makes to its snapshot (a placement, a
// drain, a node removed or added), applied alike to two snapshots.
type snapshotChange func(s *Snapshot)

// changes returns n random changes on the world's nodes and pending pods.
func (w *reuseWorld) changes(n int) []snapshotChange {
	var out []snapshotChange
	for range n {
		node, ok := pick(w.rnd, w.nodeNames())
		if !ok {
			return out
		}
		switch w.rnd.IntN(5) {
		case 0, 1:
			if name, ok := pick(w.rnd, w.podNames(false)); ok {
				p := w.pods[name]
				out = append(out, func(s *Snapshot) { _ = s.AddPod(p, node) })
			}
		case 2:
			var on []*apiv1.Pod
			for _, k := range w.podNames(true) {
				if w.pods[k].Spec.NodeName == node {
					on = append(on, w.pods[k])
				}
			}
			if p, ok := pick(w.rnd, on); ok {
				out = append(out, func(s *Snapshot) { _ = s.RemovePod(p, node) })
			}
		case 3:
			out = append(out, func(s *Snapshot) { _ = s.RemoveNode(node) })
		case 4:
			twin := w.newNode(fmt.Sprint("twin-", w.serial, "-", len(out)))
			out = append(out, func(s *Snapshot) {
				_ = s.CopyNode(node, twin)
				s.SetCSINode(twin.Name, &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: twin.Name}})
			})
		}
	}
	return out
}

// TestResetKeepsOnlyWhatIsUnchanged drives a snapshot Reset after every
// step of a seeded random stream of node, pod and DRA events, changed by a
// loop's kind of changes between Resets (at the base level, in a Fork
// reverted, in a Fork committed), and compares it each time with one built
// from scratch by NewSnapshot: kept NodeInfos must be exactly the ones a
// rebuild gives.
func TestResetKeepsOnlyWhatIsUnchanged(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { checkResetAgainstScratch(t, seed, 120) })
	}
}

func checkResetAgainstScratch(t *testing.T, seed uint64, steps int) {
	ctx := t.Context()
	w := &reuseWorld{rnd: rand.New(rand.NewPCG(seed, 41)), nodes: map[string]*apiv1.Node{}, pods: map[string]*apiv1.Pod{},
		dra: newDRAFixture()}
	for i := range 3 {
		w.dra.claims = append(w.dra.claims, &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default",
			Name: fmt.Sprint("claim-", i)}, Spec: resourceapi.ResourceClaimSpec{Devices: gpuRequests(1)}})
	}
	for i := range 6 {
		name := fmt.Sprint("n-init-", i)
		w.nodes[name] = w.newNode(name)
	}
	inc := newDRAHandle(t, w.dra)
	kept := 0
	for i := range steps {
		var events []string
		for range 1 + w.rnd.IntN(3) {
			events = append(events, w.step())
		}
		nodes, pods := w.lists()
		inc.snapshot.Reset(nodes, pods)
		k, _ := inc.snapshot.ReuseStats()
		kept += k
		at := fmt.Sprintf("seed %d step %d after %v", seed, i, events)
		scratch := func() *Handle { return handleOn(t, NewSnapshot(nodes, pods), w.dra) }
		wantH := scratch()
		want := wantH.snapshot
		compareSnapshots(t, at+" (Reset)", inc.snapshot, want)
		compareFilters(ctx, t, at, inc, wantH)

		// A Fork whose changes are reverted leaves what the Reset built.
		inc.snapshot.Fork()
		for _, c := range w.changes(3) {
			c(inc.snapshot)
		}
		inc.snapshot.Revert()
		compareSnapshots(t, at+" (Fork, Revert)", inc.snapshot, want)

		// A Fork whose changes are committed is the same changes made on a
		// snapshot built from scratch.
		cs := w.changes(3)
		inc.snapshot.Fork()
		for _, c := range cs {
			c(inc.snapshot)
		}
		inc.snapshot.Commit()
		want = scratch().snapshot
		for _, c := range cs {
			c(want)
		}
		compareSnapshots(t, at+" (Fork, Commit)", inc.snapshot, want)

		// Changes at the base level (as the loop places pending pods that
		// fit before any Fork) must not reach the NodeInfos the next Reset
		// keeps.
		cs = w.changes(3)
		for _, c := range cs {
			c(inc.snapshot)
			c(want)
		}
		compareSnapshots(t, at+" (base changes)", inc.snapshot, want)
	}
	t.Logf("seed %d: %d NodeInfos kept over %d Resets", seed, kept, steps)
	if kept == 0 {
		t.Fatalf("seed %d: no Reset kept a NodeInfo: the test does not exercise reuse", seed)
	}
}

// compareFilters checks that the Filter plugins (the inter-pod affinity
// plugin reads the snapshot's affinity lists) answer alike on both.
func compareFilters(ctx context.Context, t *testing.T, at string, inc, h *Handle) {
	t.Helper()
	probes := []*apiv1.Pod{makePod("probe-anti", "100m").AntiAffinity("app", "a1").Obj(),
		makePod("probe-port", "100m").Label("app", "a0").HostPort(8080).Obj()}
	for _, p := range probes {
		a, b := inc.Prepare(ctx, p), h.Prepare(ctx, p)
		for _, n := range inc.snapshot.NodeNames() {
			ea, eb := a.Fits(ctx, n), b.Fits(ctx, n)
			if (ea == nil) != (eb == nil) {
				t.Fatalf("%s: pod %s on %s: incremental %v, from scratch %v", at, p.Name, n, ea, eb)
			}
		}
	}
}

// compareSnapshots fails unless a and b hold the same nodes (in the same
// order) with equal NodeInfos, the same affinity lists, DRA objects and
// CSINodes. Pods are compared as sets (a Reset is given them in the
// informers' arbitrary order); generations are not compared.
func compareSnapshots(t *testing.T, at string, a, b *Snapshot) {
	t.Helper()
	if got, want := a.NodeNames(), b.NodeNames(); !slices.Equal(got, want) {
		t.Fatalf("%s: nodes %v, from scratch %v", at, got, want)
	}
	for _, name := range a.NodeNames() {
		x, _ := a.NodeInfo(name)
		y, _ := b.NodeInfo(name)
		if err := sameNodeInfo(x, y); err != nil {
			t.Fatalf("%s: node %s: %v", at, name, err)
		}
	}
	la, lb := a.NodeInfos(), b.NodeInfos()
	aff1, _ := la.HavePodsWithAffinityList()
	aff2, _ := lb.HavePodsWithAffinityList()
	anti1, _ := la.HavePodsWithRequiredAntiAffinityList()
	anti2, _ := lb.HavePodsWithRequiredAntiAffinityList()
	if !slices.Equal(infoNames(aff1), infoNames(aff2)) || !slices.Equal(infoNames(anti1), infoNames(anti2)) {
		t.Fatalf("%s: affinity lists %v %v, from scratch %v %v", at, infoNames(aff1), infoNames(anti1),
			infoNames(aff2), infoNames(anti2))
	}
	for i := range 4 {
		key := fmt.Sprint("default/pvc-", i)
		if a.StorageInfos().IsPVCUsedByPods(key) != b.StorageInfos().IsPVCUsedByPods(key) {
			t.Fatalf("%s: PVC %s used: %v, from scratch %v", at, key, !b.StorageInfos().IsPVCUsedByPods(key),
				b.StorageInfos().IsPVCUsedByPods(key))
		}
	}
	if !reflect.DeepEqual(a.dra.claims, b.dra.claims) || !reflect.DeepEqual(a.dra.slices, b.dra.slices) ||
		!reflect.DeepEqual(a.dra.byNode, b.dra.byNode) || !reflect.DeepEqual(a.dra.nodeSlices, b.dra.nodeSlices) ||
		!reflect.DeepEqual(a.dra.classes, b.dra.classes) {
		t.Fatalf("%s: DRA objects differ from scratch", at)
	}
	if len(a.csiNodes) != len(b.csiNodes) || (len(a.csiNodes) > 0 && !reflect.DeepEqual(a.csiNodes, b.csiNodes)) {
		t.Fatalf("%s: CSINodes %v, from scratch %v", at, a.csiNodes, b.csiNodes)
	}
}

func infoNames[T interface{ Node() *apiv1.Node }](xs []T) []string {
	var out []string
	for _, x := range xs {
		out = append(out, x.Node().Name)
	}
	return out
}

// sameNodeInfo compares what the scheduler reads of two NodeInfos.
func sameNodeInfo(x, y *schedframework.NodeInfo) error {
	if x.Node() != y.Node() {
		return fmt.Errorf("node object %p, from scratch %p", x.Node(), y.Node())
	}
	type part struct {
		name string
		a, b any
	}
	emptyNil := func(m any) any {
		if v := reflect.ValueOf(m); v.Kind() == reflect.Map && v.Len() == 0 {
			return nil
		}
		return m
	}
	for _, p := range []part{
		{"pods", podInfosByKey(x.Pods), podInfosByKey(y.Pods)},
		{"pods with affinity", podInfosByKey(x.PodsWithAffinity), podInfosByKey(y.PodsWithAffinity)},
		{"pods with required anti-affinity", podInfosByKey(x.PodsWithRequiredAntiAffinity),
			podInfosByKey(y.PodsWithRequiredAntiAffinity)},
		{"requested", x.Requested, y.Requested},
		{"non-zero requested", x.NonZeroRequested, y.NonZeroRequested},
		{"allocatable", x.Allocatable, y.Allocatable},
		{"used ports", emptyNil(x.UsedPorts), emptyNil(y.UsedPorts)},
		{"image states", emptyNil(x.ImageStates), emptyNil(y.ImageStates)},
		{"PVC ref counts", emptyNil(x.PVCRefCounts), emptyNil(y.PVCRefCounts)},
		{"declared features", x.DeclaredFeatures, y.DeclaredFeatures},
		{"DRA claim states", emptyNil(x.NodeAllocatableDRAClaimStates), emptyNil(y.NodeAllocatableDRAClaimStates)},
	} {
		if !reflect.DeepEqual(p.a, p.b) {
			return fmt.Errorf("%s: %v, from scratch %v", p.name, p.a, p.b)
		}
	}
	return nil
}

// podInfosByKey maps namespace/name to the PodInfos (the scheduler's
// analysis of each pod, the pod object included).
func podInfosByKey[T interface{ GetPod() *apiv1.Pod }](pis []T) map[string]T {
	if len(pis) == 0 {
		return nil
	}
	out := make(map[string]T, len(pis))
	for _, pi := range pis {
		out[pi.GetPod().Namespace+"/"+pi.GetPod().Name] = pi
	}
	return out
}

// handleOn builds a Handle over snap, with src's DRA objects.
func handleOn(t *testing.T, snap *Snapshot, src DRASource) *Handle {
	t.Helper()
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	h, err := New(t.Context(), snap, factory, WithDRA(src))
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(t.Context().Done())
	factory.WaitForCacheSync(t.Context().Done())
	return h
}
