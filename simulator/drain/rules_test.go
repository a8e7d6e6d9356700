package drain

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"k8s.io/autoscaler/cluster-autoscaler/internal/testbuild"
)

func names(pods []*apiv1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

type classified struct {
	ToMove, Left []string
	BlockedBy    string
	Reason       BlockingReason
}

func classifiedOf(toMove, left []*apiv1.Pod, blocking *BlockingPod) classified {
	c := classified{ToMove: names(toMove), Left: names(left)}
	if blocking != nil {
		c.BlockedBy, c.Reason = blocking.Pod.Name, blocking.Reason
	}
	return c
}

func TestClassifyOrder(t *testing.T) {
	objs := []runtime.Object{replicaSet("default", "web", 3), replicaSet("kube-system", "dns", 2)}
	young := t0.Add(-time.Minute)
	web := func(name string) *testbuild.PodBuilder { return makePod(name).ReplicaSet("web") }
	tests := []struct {
		name    string
		opts    func(*Options)
		pods    []*apiv1.Pod
		pdbs    []*policyv1.PodDisruptionBudget // nil: Classify gets no budget
		want    classified
		nilLstr bool
	}{
		{name: "replicated pods move, DaemonSet and mirror pods stay",
			pods: []*apiv1.Pod{web("w1").Obj(), makePod("ds").DaemonSet("fluentd").Obj(),
				makePod("static").Namespace("kube-system").Annotate(apiv1.MirrorPodAnnotationKey, "x").Obj()},
			want: classified{ToMove: []string{"w1"}, Left: []string{"ds", "static"}}},
		{name: "safe-to-evict=true overrides local storage, not replicated and kube-system",
			pods: []*apiv1.Pod{
				web("scratch").EmptyDir("data", "").Annotate(SafeToEvictAnnotation, "true").Obj(),
				makePod("bare").Annotate(SafeToEvictAnnotation, "true").Obj(),
				makePod("sys").Namespace("kube-system").ReplicaSet("dns").Created(young).Annotate(SafeToEvictAnnotation, "true").Obj()},
			want: classified{ToMove: []string{"scratch", "bare", "sys"}}},
		{name: "DaemonSet pods never block",
			pods: []*apiv1.Pod{
				makePod("ds-local").DaemonSet("a").HostPath("logs").Obj(),
				makePod("ds-false").DaemonSet("b").Annotate(SafeToEvictAnnotation, "false").Obj(),
				makePod("ds-oncompletion").DaemonSet("c").Annotate(SafeToEvictAnnotation, "on-completion").Obj(),
				makePod("ds-sys").Namespace("kube-system").DaemonSet("kube-proxy").Created(young).Obj(),
				makePod("ds-gone").DaemonSet("deleted-daemonset").Obj(),
				makePod("ds-annotated").Annotate(DaemonSetPodAnnotation, "true").Obj()},
			want: classified{Left: []string{"ds-local", "ds-false", "ds-oncompletion", "ds-sys", "ds-gone", "ds-annotated"}}},
		{name: "terminal and long-terminating pods stay even when they would block",
			pods: []*apiv1.Pod{
				makePod("done").Phase(apiv1.PodSucceeded).HostPath("x").Obj(),
				makePod("failed").Phase(apiv1.PodFailed).Annotate(SafeToEvictAnnotation, "on-completion").Obj(),
				makePod("stuck").Annotate(SafeToEvictAnnotation, "false").Deleted(t0.Add(-time.Hour)).Obj()},
			want: classified{Left: []string{"done", "failed", "stuck"}}},
		{name: "a recently deleted pod is still judged",
			pods: []*apiv1.Pod{makePod("dying").Deleted(t0.Add(-10 * time.Second)).Obj()},
			want: classified{BlockedBy: "dying", Reason: NotReplicated}},
		{name: "on-completion blocks a running pod, even a replicated one",
			pods: []*apiv1.Pod{web("w1").Obj(), web("batch").Annotate(SafeToEvictAnnotation, "on-completion").Obj()},
			want: classified{BlockedBy: "batch", Reason: BlockedByOnCompletion}},
		{name: "the first blocking pod wins; nothing else is returned",
			pods: []*apiv1.Pod{web("w1").Obj(), web("local").HostPath("x").Obj(), makePod("bare").Obj()},
			want: classified{BlockedBy: "local", Reason: LocalStorageRequested}},
		{name: "not replicated comes before safe-to-evict=false",
			pods: []*apiv1.Pod{makePod("bare").Annotate(SafeToEvictAnnotation, "false").Obj()},
			want: classified{BlockedBy: "bare", Reason: NotReplicated}},
		{name: "kube-system comes before safe-to-evict=false and local storage",
			pods: []*apiv1.Pod{makePod("sys").Namespace("kube-system").ReplicaSet("dns").Created(young).HostPath("x").
				Annotate(SafeToEvictAnnotation, "false").Obj()},
			want: classified{BlockedBy: "sys", Reason: UnmovableKubeSystemPod}},
		{name: "safe-to-evict=false comes before local storage",
			pods: []*apiv1.Pod{web("w").HostPath("x").Annotate(SafeToEvictAnnotation, "false").Obj()},
			want: classified{BlockedBy: "w", Reason: NotSafeToEvictAnnotation}},
		{name: "flags off: kube-system and local storage move",
			opts: func(o *Options) { o.SkipNodesWithSystemPods, o.SkipNodesWithLocalStorage = false, false },
			pods: []*apiv1.Pod{makePod("sys").Namespace("kube-system").ReplicaSet("dns").Created(young).Obj(), web("local").HostPath("x").Obj()},
			want: classified{ToMove: []string{"sys", "local"}}},
		{name: "old kube-system pod without PDB moves",
			pods: []*apiv1.Pod{makePod("sys").Namespace("kube-system").ReplicaSet("dns").Created(t0.Add(-2 * time.Hour)).Obj()},
			want: classified{ToMove: []string{"sys"}}},
		{name: "custom-controller flag on: missing controller blocks before safe-to-evict=true",
			pods: []*apiv1.Pod{web("w1").Obj(), makePod("orphan").ReplicaSet("gone").Annotate(SafeToEvictAnnotation, "true").Obj()},
			want: classified{BlockedBy: "orphan", Reason: ControllerNotFound}},
		{name: "custom-controller flag off: safe-to-evict=true wins over a missing controller",
			opts: func(o *Options) { o.SkipNodesWithCustomControllerPods = false },
			pods: []*apiv1.Pod{makePod("orphan").ReplicaSet("gone").Annotate(SafeToEvictAnnotation, "true").Obj()},
			want: classified{ToMove: []string{"orphan"}}},
		{name: "custom-controller flag off: a missing controller still blocks",
			opts: func(o *Options) { o.SkipNodesWithCustomControllerPods = false },
			pods: []*apiv1.Pod{makePod("orphan").ReplicaSet("gone").Obj()},
			want: classified{BlockedBy: "orphan", Reason: ControllerNotFound}},
		{name: "custom controller: blocks with the flag on",
			pods: []*apiv1.Pod{makePod("w").Owner("example.com/v1", "Widget", "w").Obj()},
			want: classified{BlockedBy: "w", Reason: NotReplicated}},
		{name: "custom controller: moves with the flag off",
			opts: func(o *Options) { o.SkipNodesWithCustomControllerPods = false },
			pods: []*apiv1.Pod{makePod("w").Owner("example.com/v1", "Widget", "w").Obj()},
			want: classified{ToMove: []string{"w"}}},
		{name: "min replica count needs the custom-controller flag",
			opts: func(o *Options) { o.MinReplicaCount = 5 },
			pods: []*apiv1.Pod{web("w1").Obj()},
			want: classified{BlockedBy: "w1", Reason: MinReplicasReached}},
		{name: "min replica count ignored with the flag off",
			opts: func(o *Options) { o.MinReplicaCount, o.SkipNodesWithCustomControllerPods = 5, false },
			pods: []*apiv1.Pod{web("w1").Obj()},
			want: classified{ToMove: []string{"w1"}}},
		{name: "nil listers: controllers assumed present",
			nilLstr: true,
			pods:    []*apiv1.Pod{makePod("orphan").ReplicaSet("gone").Obj()},
			want:    classified{ToMove: []string{"orphan"}}},
		{name: "kube-system pod covered by a PDB moves when budget is left",
			pods: []*apiv1.Pod{makePod("sys").Namespace("kube-system").ReplicaSet("dns").Label("app", "dns").Created(young).Obj()},
			pdbs: []*policyv1.PodDisruptionBudget{pdb("kube-system", "dns", "dns", 1)},
			want: classified{ToMove: []string{"sys"}}},
		{name: "kube-system pod covered by a PDB without budget: NotEnoughPdb, not UnmovableKubeSystemPod",
			pods: []*apiv1.Pod{makePod("sys").Namespace("kube-system").ReplicaSet("dns").Label("app", "dns").Created(young).Obj()},
			pdbs: []*policyv1.PodDisruptionBudget{pdb("kube-system", "dns", "dns", 0)},
			want: classified{BlockedBy: "sys", Reason: NotEnoughPdb}},
		{name: "safe-to-evict=true still spends PDB budget",
			pods: []*apiv1.Pod{web("w1").Label("app", "web").Annotate(SafeToEvictAnnotation, "true").Obj()},
			pdbs: []*policyv1.PodDisruptionBudget{pdb("default", "web", "web", 0)},
			want: classified{BlockedBy: "w1", Reason: NotEnoughPdb}},
		{name: "two pods of one PDB allowing one disruption",
			pods: []*apiv1.Pod{web("w1").Label("app", "web").Obj(), web("w2").Label("app", "web").Obj()},
			pdbs: []*policyv1.PodDisruptionBudget{pdb("default", "web", "web", 1)},
			want: classified{BlockedBy: "w2", Reason: NotEnoughPdb}},
		{name: "pods left on the node spend no budget",
			pods: []*apiv1.Pod{makePod("ds").DaemonSet("x").Label("app", "web").Obj(),
				web("done").Label("app", "web").Phase(apiv1.PodSucceeded).Obj()},
			pdbs: []*policyv1.PodDisruptionBudget{pdb("default", "web", "web", 0)},
			want: classified{Left: []string{"ds", "done"}}},
		{name: "no budget given: PDBs are not checked",
			pods: []*apiv1.Pod{web("w1").Label("app", "web").Obj()},
			want: classified{ToMove: []string{"w1"}}},
		{name: "empty node", want: classified{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := defaultOptions()
			if tc.opts != nil {
				tc.opts(&opts)
			}
			listers := makeListers(t, objs...)
			if tc.nilLstr {
				listers = Listers{}
			}
			r := NewRules(opts, listers)
			var budget *PDBs
			if tc.pdbs != nil {
				budget = PDBsFromList(tc.pdbs)
			}
			toMove, left, blocking := r.Classify(tc.pods, budget, t0)
			if blocking != nil && blocking.Detail == "" {
				t.Errorf("blocking pod %s without detail", blocking.Pod.Name)
			}
			if diff := cmp.Diff(tc.want, classifiedOf(toMove, left, blocking)); diff != "" {
				t.Errorf("Classify (-want +got):\n%s", diff)
			}
		})
	}
}

func TestClassifyPDBBudgetAcrossNodes(t *testing.T) {
	r := NewRules(defaultOptions(), makeListers(t, replicaSet("default", "web", 3), pdb("default", "web", "web", 1)))
	webPod := func(name string) *apiv1.Pod { return makePod(name).ReplicaSet("web").Label("app", "web").Obj() }
	node1 := []*apiv1.Pod{webPod("a")}
	node2 := []*apiv1.Pod{webPod("b")}
	node3 := []*apiv1.Pod{webPod("c"), makePod("bare").Obj()} // blocked: spends nothing

	budget, err := r.NewPDBs()
	if err != nil {
		t.Fatal(err)
	}
	check := func(step string, got classified, want classified) {
		t.Helper()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", step, diff)
		}
	}

	// A blocked node leaves the budget untouched.
	check("node3", classifiedOf(r.Classify(node3, budget, t0)), classified{BlockedBy: "bare", Reason: NotReplicated})
	if got, _ := budget.Remaining("default", "web"); got != 1 {
		t.Fatalf("after a blocked node, remaining = %d, want 1", got)
	}

	// Trying node1 on a fork does not spend the parent's budget.
	trial := budget.Fork()
	check("node1 on fork", classifiedOf(r.Classify(node1, trial, t0)), classified{ToMove: []string{"a"}})
	check("node2 on fork", classifiedOf(r.Classify(node2, trial, t0)), classified{BlockedBy: "b", Reason: NotEnoughPdb})
	check("node2 on parent", classifiedOf(r.Classify(node2, budget, t0)), classified{ToMove: []string{"b"}})

	// The same budget, shared by two decisions: the second node finds it spent.
	check("node1 after node2", classifiedOf(r.Classify(node1, budget, t0)), classified{BlockedBy: "a", Reason: NotEnoughPdb})
	if got, _ := budget.Remaining("default", "web"); got != 0 {
		t.Errorf("remaining = %d, want 0", got)
	}
}

func TestClassifyConcurrentForks(t *testing.T) {
	r := NewRules(defaultOptions(), makeListers(t, replicaSet("default", "web", 3), pdb("default", "web", "web", 5)))
	budget, err := r.NewPDBs()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan int32)
	for i := range 4 {
		go func() {
			f := budget.Fork()
			pod := makePod("p"+string(rune('a'+i))).ReplicaSet("web").Label("app", "web").Obj()
			r.Classify([]*apiv1.Pod{pod}, f, t0)
			n, _ := f.Remaining("default", "web")
			done <- n
		}()
	}
	for range 4 {
		if n := <-done; n != 4 {
			t.Errorf("fork remaining = %d, want 4", n)
		}
	}
	if n, _ := budget.Remaining("default", "web"); n != 5 {
		t.Errorf("parent remaining = %d, want 5", n)
	}
}
