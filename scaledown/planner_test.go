package scaledown

import (
	"context"
	"maps"
	"strconv"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/drain"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// session fakes the loop's simulation: pods fit elsewhere unless a node is
// listed in full; extra lists pods the loop placed on a node.
type session struct {
	full  map[string]bool
	extra map[string]int
	real  map[string][]*apiv1.Pod
	// avoided records, by node, the destinations TryRemove was told to avoid.
	avoided map[string]map[string]bool
}

func (s *session) PodsOn(node string) []*apiv1.Pod {
	out := append([]*apiv1.Pod(nil), s.real[node]...)
	for i := 0; i < s.extra[node]; i++ {
		out = append(out, &apiv1.Pod{})
	}
	return out
}

func (s *session) TryRemove(_ context.Context, node string, move []*apiv1.Pod, avoid map[string]bool) bool {
	if s.avoided == nil {
		s.avoided = map[string]map[string]bool{}
	}
	s.avoided[node] = maps.Clone(avoid)
	return len(move) == 0 || !s.full[node]
}

func node(name string, taints ...apiv1.Taint) *apiv1.Node {
	rl := apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("4"), apiv1.ResourceMemory: resource.MustParse("16Gi")}
	return &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{},
		CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))},
		Spec: apiv1.NodeSpec{Taints: taints},
		Status: apiv1.NodeStatus{Allocatable: rl, Capacity: rl,
			Conditions: []apiv1.NodeCondition{{Type: apiv1.NodeReady, Status: apiv1.ConditionTrue}}}}
}

func pod(name, nodeName, cpu string) *apiv1.Pod {
	yes := true
	return &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", Controller: &yes}}},
		Spec: apiv1.PodSpec{NodeName: nodeName, Containers: []apiv1.Container{{Name: "c", Resources: apiv1.ResourceRequirements{
			Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse(cpu)}}}}},
		Status: apiv1.PodStatus{Phase: apiv1.PodRunning}}
}

type fixture struct {
	p       *fakeprovider.Provider
	g       *fakeprovider.NodeGroup
	nodes   []*apiv1.Node
	pods    []*apiv1.Pod
	sess    *session
	client  *fake.Clientset
	planner *Planner
	state   *clusterstate.Registry
}

// newFixture: group g (min 1) with nodes; each node name maps to the cpu
// its one pod requests ("" for none).
// fixtureOptions are the planner's options and what else the fixture wires
// from the flags: the soft-taint limit and the registry's per-group
// defaults.
type fixtureOptions struct {
	Options
	MaxBulkSoftTaintCount int
	NodeGroupDefaults     config.NodeGroupAutoscalingOptions
}

func newFixture(t *testing.T, min int, nodes map[string]string, opts func(*fixtureOptions)) *fixture {
	t.Helper()
	f := &fixture{p: fakeprovider.NewProvider(), sess: &session{full: map[string]bool{}, extra: map[string]int{},
		real: map[string][]*apiv1.Pod{}}}
	f.g = f.p.AddNodeGroup("g", min, 10, len(nodes), nil)
	d := config.Defaults()
	o := fixtureOptions{Options: DefaultOptions(), MaxBulkSoftTaintCount: d.MaxBulkSoftTaintCount, NodeGroupDefaults: d.NodeGroupDefaults}
	if opts != nil {
		opts(&o)
	}
	for name, cpu := range nodes {
		n := node(name)
		f.p.AddNode("g", n)
		f.nodes = append(f.nodes, n)
		if cpu != "" {
			p := pod("p-"+name, name, cpu)
			f.pods = append(f.pods, p)
			f.sess.real[name] = []*apiv1.Pod{p}
		}
	}
	f.client = fake.NewClientset()
	for _, n := range f.nodes {
		if _, err := f.client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rules := drain.NewRules(drain.Options{SkipNodesWithCustomControllerPods: false}, drain.Listers{})
	f.planner = NewPlanner(o.Options, f.p, rules, NewTaints(f.client, o.MaxBulkSoftTaintCount, false))
	so := clusterstate.DefaultOptions()
	so.NodeGroupDefaults = o.NodeGroupDefaults
	f.state = clusterstate.NewRegistry(so)
	return f
}

func (f *fixture) plan(t *testing.T, now time.Time) *Plan {
	t.Helper()
	// Nodes as the API has them now (taints written by the planner).
	var nodes []*apiv1.Node
	for _, n := range f.nodes {
		cur, err := f.client.CoreV1().Nodes().Get(context.Background(), n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, cur)
	}
	if err := f.state.Update(context.Background(), f.p, nodes, now); err != nil {
		t.Fatal(err)
	}
	return f.planner.Update(context.Background(), Input{Now: now, Nodes: nodes, ScheduledPods: f.pods, State: f.state,
		Session: f.sess})
}

// setPodCPU changes the requests of the pod on node: as informers do, the
// changed pod is a new object.
func (f *fixture) setPodCPU(node, cpu string) {
	changed := pod("p-"+node, node, cpu)
	for i, p := range f.pods {
		if p.Name == changed.Name {
			f.pods[i] = changed
		}
	}
	f.sess.real[node] = []*apiv1.Pod{changed}
}

func names(cs []*Candidate) map[string]bool {
	out := map[string]bool{}
	for _, c := range cs {
		out[c.Node.Name] = true
	}
	return out
}

func TestPlannerReasonsAndTimers(t *testing.T) {
	f := newFixture(t, 1, map[string]string{"busy": "3", "light": "1", "empty": "", "blocked": "1", "booked": ""}, nil)
	f.sess.full["blocked"] = true // its pod has nowhere to go
	f.sess.extra["booked"] = 2    // the loop placed booked pods there
	plan := f.plan(t, t0)
	want := map[string]string{"busy": ReasonNotUnderutilized, "blocked": ReasonNoPlaceToMovePods, "booked": ReasonBookedCapacity,
		"light": ReasonNotUnneededLongEnough, "empty": ReasonNotUnneededLongEnough}
	for n, r := range want {
		if plan.Unremovable[n] != r {
			t.Errorf("%s: reason %q, want %q", n, plan.Unremovable[n], r)
		}
	}
	if got := names(plan.Unneeded); !got["light"] || !got["empty"] || len(got) != 2 {
		t.Errorf("unneeded %v, want light and empty", got)
	}
	// The candidates carry the DeletionCandidate taint with the time.
	n, _ := f.client.CoreV1().Nodes().Get(context.Background(), "light", metav1.GetOptions{})
	if since, ok := taintTime(n, DeletionCandidateTaint); !ok || !since.Equal(t0) {
		t.Fatalf("light's candidate taint: %v %v", since, ok)
	}
	// 11 minutes later both are removable, but the group (min 1, 5 nodes)
	// may lose 4: both go.
	plan = f.plan(t, t0.Add(11*time.Minute))
	if got := names(plan.Removable); !got["light"] || !got["empty"] {
		t.Errorf("removable %v, want light and empty", got)
	}
	// light gets busy: needed again, its taint goes.
	f.setPodCPU("light", "3")
	f.plan(t, t0.Add(12*time.Minute))
	n, _ = f.client.CoreV1().Nodes().Get(context.Background(), "light", metav1.GetOptions{})
	if _, ok := taintTime(n, DeletionCandidateTaint); ok {
		t.Error("a needed node kept its candidate taint")
	}
}

// TestPlannerKeepsNodesOfABlockedGroup: while the group says its nodes may
// not go (cloudprovider.ScaleDownBlocker), every node of it is kept with
// the reason NodeGroupScaleDownBlocked and the group's words as the detail,
// none is a candidate (no candidate taint); once it no longer does, they
// are planned as before.
func TestPlannerKeepsNodesOfABlockedGroup(t *testing.T) {
	f := newFixture(t, 0, map[string]string{"empty": "", "light": "1"}, nil)
	f.g.SetScaleDownBlocked("rolling out")
	plan := f.plan(t, t0)
	for _, n := range []string{"empty", "light"} {
		if plan.Unremovable[n] != ReasonNodeGroupScaleDownBlocked || plan.Details[n] != "rolling out" {
			t.Errorf("%s: reason %q detail %q, want %q with the group's reason", n, plan.Unremovable[n], plan.Details[n],
				ReasonNodeGroupScaleDownBlocked)
		}
		cur, _ := f.client.CoreV1().Nodes().Get(context.Background(), n, metav1.GetOptions{})
		if _, ok := taintTime(cur, DeletionCandidateTaint); ok {
			t.Errorf("%s of a blocked group got the candidate taint", n)
		}
	}
	if len(plan.Unneeded) != 0 || len(plan.Removable) != 0 {
		t.Errorf("unneeded %v, removable %v: want none while blocked", names(plan.Unneeded), names(plan.Removable))
	}
	f.g.SetScaleDownBlocked("")
	plan = f.plan(t, t0.Add(time.Minute))
	if got := names(plan.Unneeded); !got["empty"] || !got["light"] {
		t.Errorf("unneeded %v after the block ended, want empty and light", got)
	}
}

func TestPlannerTimerComesFromTheTaint(t *testing.T) {
	f := newFixture(t, 0, map[string]string{"a": ""}, nil)
	// A previous run marked it 9 minutes ago.
	n, _ := f.client.CoreV1().Nodes().Get(context.Background(), "a", metav1.GetOptions{})
	n.Spec.Taints = []apiv1.Taint{{Key: DeletionCandidateTaint, Value: strconv.FormatInt(t0.Add(-9*time.Minute).Unix(), 10),
		Effect: apiv1.TaintEffectPreferNoSchedule}}
	if _, err := f.client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if plan := f.plan(t, t0); len(plan.Removable) != 0 {
		t.Fatal("removable before its 10 minutes")
	}
	if plan := f.plan(t, t0.Add(61*time.Second)); len(plan.Removable) != 1 {
		t.Error("not removable 10 minutes after the time on its taint")
	}
}

func TestPlannerMinSizeAndDisabledAnnotation(t *testing.T) {
	f := newFixture(t, 2, map[string]string{"a": "", "b": "", "c": ""}, nil)
	n, _ := f.client.CoreV1().Nodes().Get(context.Background(), "c", metav1.GetOptions{})
	n.Annotations[ScaleDownDisabledAnnotation] = "true"
	if _, err := f.client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.plan(t, t0)
	plan := f.plan(t, t0.Add(11*time.Minute))
	if plan.Unremovable["c"] != ReasonScaleDownDisabledAnnotation {
		t.Errorf("c: %q", plan.Unremovable["c"])
	}
	// Three nodes, min 2: one of a and b may go.
	if len(plan.Removable) != 1 {
		t.Errorf("removable %v, want one (min size 2 of 3)", names(plan.Removable))
	}
	reasons := 0
	for _, r := range plan.Unremovable {
		if r == ReasonNodeGroupMinSizeReached {
			reasons++
		}
	}
	if reasons != 1 {
		t.Errorf("%d nodes kept for the min size, want 1", reasons)
	}
}

func TestCooldowns(t *testing.T) {
	o := DefaultOptions()
	a := NewActuator(o, fake.NewClientset(), nil, nil, nil, nil)
	s := New(o, nil, a, nil)
	s.ScaledUp(t0)
	if in, why := s.cooldown(t0.Add(9 * time.Minute)); !in || why != "scale-down-delay-after-add" {
		t.Errorf("9m after a scale-up: %v %q", in, why)
	}
	if in, _ := s.cooldown(t0.Add(11 * time.Minute)); in {
		t.Error("still in cooldown 11m after a scale-up")
	}
	a.lastFailure = t0.Add(11 * time.Minute)
	if in, why := s.cooldown(t0.Add(12 * time.Minute)); !in || why != "scale-down-delay-after-failure" {
		t.Errorf("1m after a failure: %v %q", in, why)
	}
}

// skipCounter records the skipped scale-down events.
type skipCounter struct {
	nopMetrics
	skipped map[string]int
}

func (s *skipCounter) RegisterSkippedScaleEvent(direction, reason string) {
	s.skipped[direction+"/"+reason]++
}

// TestPlannerKeepsTheMinimumCores: three empty 4-core nodes, --cores-total
// minimum 6: one may go (8 cores stay), the others are kept for the limit
// and counted as skipped scale-downs.
func TestPlannerKeepsTheMinimumCores(t *testing.T) {
	f := newFixture(t, 0, map[string]string{"a": "", "b": "", "c": ""}, func(o *fixtureOptions) { o.Cores.Min = 6 })
	counter := &skipCounter{skipped: map[string]int{}}
	f.planner.report = counter
	f.plan(t, t0)
	plan := f.plan(t, t0.Add(11*time.Minute))
	if len(plan.Removable) != 1 {
		t.Errorf("removable %v, want one (12 cores, minimum 6)", names(plan.Removable))
	}
	kept := 0
	for _, r := range plan.Unremovable {
		if r == ReasonMinimalResourceLimit {
			kept++
		}
	}
	if kept != 2 {
		t.Errorf("%d nodes kept for the cores minimum, want 2", kept)
	}
	if got := counter.skipped["down/CpuResourceLimit"]; got != 2 {
		t.Errorf("skipped scale-downs for CPU = %d, want 2", got)
	}
}

// TestPlannerKeepsTheMinimumGPUs: three empty nodes with 2 t4 GPUs each,
// --gpu-total t4 minimum 3: one may go (4 GPUs stay), the others are kept.
func TestPlannerKeepsTheMinimumGPUs(t *testing.T) {
	f := newFixture(t, 0, map[string]string{"a": "", "b": "", "c": ""}, func(o *fixtureOptions) {
		o.GPUTotal = []config.GPULimit{{Type: "t4", Min: 3, Max: 100}}
	})
	for _, n := range f.nodes {
		n.Labels = map[string]string{"fake.gpu/type": "t4"}
		n.Status.Capacity["nvidia.com/gpu"] = resource.MustParse("2")
		if _, err := f.client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f.plan(t, t0)
	plan := f.plan(t, t0.Add(11*time.Minute))
	if len(plan.Removable) != 1 {
		t.Errorf("removable %v, want one (6 GPUs, minimum 3)", names(plan.Removable))
	}
}

// TestPlannerLeavesNodesWithoutTheirDevices: a node whose Ready condition
// is true but whose GPUs (the provider's GPU label, no GPU resource yet)
// are not there is not started while young, as the registry counts it: no
// scale-down candidate; once past its startup time it is unready.
func TestPlannerLeavesNodesWithoutTheirDevices(t *testing.T) {
	f := newFixture(t, 0, map[string]string{"plain": "", "gpu": ""}, nil)
	for _, n := range f.nodes {
		if n.Name == "gpu" {
			n.Labels = map[string]string{f.p.GPULabel(): "a100"}
			n.CreationTimestamp = metav1.NewTime(t0.Add(-time.Minute))
			if _, err := f.client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	plan := f.plan(t, t0)
	if got := plan.Unremovable["gpu"]; got != ReasonNotStarted {
		t.Errorf("young node without its GPUs: reason %q, want %q", got, ReasonNotStarted)
	}
	if got := names(plan.Unneeded); !got["plain"] || got["gpu"] {
		t.Errorf("unneeded %v, want plain only", got)
	}
	plan = f.plan(t, t0.Add(time.Hour))
	if got := plan.Unremovable["gpu"]; got == ReasonNotStarted {
		t.Errorf("node past its startup time still not started")
	}
}
