package estimator

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/template"
)

// referenceEstimate is the straightforward simulation the estimator must
// agree with: every pod, in order, is offered to every added node in the
// order they were added (the cheap room check, then PreFilter and Filter),
// and gets a fresh template node of its own when none accepts it. Every node
// is a real snapshot node. It is slow: O(pods x nodes).
func referenceEstimate(t *testing.T, sim *framework.Handle, groups []*Group, info *cloudprovider.NodeInfo, limits Limits) Estimate {
	t.Helper()
	ctx := context.Background()
	snap := sim.Snapshot()
	snap.Fork()
	defer snap.Revert()
	nodeCPU := info.Node.Status.Capacity.Cpu().MilliValue()
	nodeMem := info.Node.Status.Capacity.Memory().Value()
	res := Estimate{Unschedulable: map[*apiv1.Pod]error{}}
	var nodes []string
	limitFor := func() Limit {
		n := int64(len(nodes) + 1)
		switch {
		case len(nodes) >= limits.MaxNodes:
			return LimitMaxNodes
		case limits.MaxMilliCPU > 0 && n*nodeCPU > limits.MaxMilliCPU:
			return LimitCPU
		case limits.MaxMemoryBytes > 0 && n*nodeMem > limits.MaxMemoryBytes:
			return LimitMemory
		}
		return LimitNone
	}
	for _, g := range groups {
		for _, p := range g.Pods {
			check := sim.Prepare(ctx, p)
			if err := check.Err(); err != nil {
				res.Unschedulable[p] = err
				continue
			}
			placed := ""
			for _, n := range nodes {
				if snap.HasRoom(n, framework.RequestOf(p)) && check.Fits(ctx, n) == nil {
					placed = n
					break
				}
			}
			if placed == "" {
				if limit := limitFor(); limit != LimitNone {
					res.LimitedBy = limit
					continue
				}
				node, dsPods := template.Clone(info, "ref", len(nodes))
				if err := snap.AddNode(node, dsPods...); err != nil {
					t.Fatal(err)
				}
				if c, ok := snap.CSINode(info.Node.Name); ok {
					snap.SetCSINode(node.Name, framework.RenamedCSINode(c, node.Name))
				}
				if err := sim.Prepare(ctx, p).Fits(ctx, node.Name); err != nil {
					res.Unschedulable[p] = err
					if err := snap.RemoveNode(node.Name); err != nil {
						t.Fatal(err)
					}
					continue
				}
				nodes = append(nodes, node.Name)
				placed = node.Name
			}
			if err := snap.AddPod(p, placed); err != nil {
				t.Fatal(err)
			}
			res.Scheduled = append(res.Scheduled, p)
		}
	}
	res.NodeCount = len(nodes)
	return res
}

// outcome is what callers read of an estimate, comparable across runs:
// reasons by plugin and message (node names differ between the two).
type outcome struct {
	NodeCount     int
	Scheduled     []string
	Unschedulable map[string]string
	LimitedBy     Limit
}

func outcomeOf(est Estimate) outcome {
	o := outcome{NodeCount: est.NodeCount, LimitedBy: est.LimitedBy, Unschedulable: map[string]string{}}
	for _, p := range est.Scheduled {
		o.Scheduled = append(o.Scheduled, p.Name)
	}
	for p, err := range est.Unschedulable {
		var u *framework.Unschedulable
		if errors.As(err, &u) {
			o.Unschedulable[p.Name] = fmt.Sprintf("%s: %v", u.Plugin, u.Reasons)
		} else {
			o.Unschedulable[p.Name] = err.Error()
		}
	}
	return o
}

func memory(q string) func(*apiv1.Pod) {
	return func(p *apiv1.Pod) {
		p.Spec.Containers[0].Resources.Requests[apiv1.ResourceMemory] = resource.MustParse(q)
	}
}

// antiAffinityTo keeps the pod off nodes running pods labelled app=app.
func antiAffinityTo(app string) func(*apiv1.Pod) {
	return func(p *apiv1.Pod) {
		p.Spec.Affinity = &apiv1.Affinity{PodAntiAffinity: &apiv1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []apiv1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
				TopologyKey:   apiv1.LabelHostname,
			}}}}
	}
}

func spread(p *apiv1.Pod) {
	p.Spec.TopologySpreadConstraints = []apiv1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: apiv1.LabelHostname,
		WhenUnsatisfiable: apiv1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": p.Labels["app"]}}}}
}

func concat(lists ...[]*apiv1.Pod) []*apiv1.Pod {
	var out []*apiv1.Pod
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// TestEstimateMatchesPodByPod: node classes give what placing every pod on
// real nodes gives, for mixed workloads, templates and limits hit mid-group.
func TestEstimateMatchesPodByPod(t *testing.T) {
	ds := pods("ds", 1, "300m")[0]
	mixed := func() []*apiv1.Pod {
		return concat(pods("a", 37, "300m"), pods("b", 50, "1100m"), pods("c", 9, "2500m"), pods("d", 120, "100m"),
			pods("e", 13, "700m", memory("3Gi")), pods("f", 6, "50m", memory("7Gi")))
	}
	for _, tc := range []struct {
		name     string
		pods     []*apiv1.Pod
		template *cloudprovider.NodeInfo
		limits   Limits
	}{
		{name: "mixed on 4 cpu", pods: mixed(), template: templateInfo("4")},
		{name: "mixed on 16 cpu with a daemonset", pods: mixed(), template: templateInfo("16", ds)},
		{name: "mixed on 7 cpu", pods: mixed(), template: templateInfo("7", ds)},
		{name: "pod slots bind", pods: concat(pods("tiny", 500, "10m"), pods("small", 70, "300m")), template: templateInfo("64")},
		{name: "memory binds", pods: concat(pods("m", 23, "100m", memory("5Gi")), pods("n", 11, "100m", memory("3Gi"))),
			template: templateInfo("8")},
		{name: "max nodes mid-group", pods: mixed(), template: templateInfo("4"), limits: Limits{MaxNodes: 23}},
		{name: "max nodes mid-class", pods: mixed(), template: templateInfo("16"), limits: Limits{MaxNodes: 5}},
		{name: "cpu limit mid-group", pods: mixed(), template: templateInfo("4"), limits: Limits{MaxNodes: 1000, MaxMilliCPU: 50_000}},
		{name: "memory limit mid-group", pods: mixed(), template: templateInfo("16", ds),
			limits: Limits{MaxNodes: 1000, MaxMemoryBytes: 9 * 16 << 30}},
		{name: "unschedulable groups in between",
			pods: concat(pods("a", 30, "700m"), pods("huge", 3, "9"), pods("b", 17, "300m"), pods("sel", 4, "100m", selector("pool", "b")),
				pods("c", 40, "1"), pods("slotted", 2, "100m", selector("pool", "a"))), template: templateInfo("8", ds)},
		{name: "interacting groups in between",
			pods: concat(pods("a", 45, "700m"), pods("anti", 9, "300m", antiAffinity), pods("b", 30, "300m"),
				pods("avoid-a", 7, "200m", antiAffinityTo("a")), pods("c", 25, "1"), pods("spread", 12, "100m", spread),
				pods("d", 60, "100m")), template: templateInfo("4")},
		{name: "pods kept off nodes by interacting pods",
			pods:     concat(pods("avoid-b", 5, "100m", antiAffinityTo("b")), pods("b", 40, "500m"), pods("a", 30, "300m")),
			template: templateInfo("8")},
		// a: six nodes with 1.5 cpu left; b ends inside them (one full node,
		// one with 0.5 left, four untouched); c must take the 0.5 left,
		// so that the four 1.5 pods of d find the untouched nodes.
		{name: "a split class keeps its nodes in order",
			pods:     concat(pods("a", 6, "2500m"), pods("b", 5, "500m"), pods("c", 1, "500m"), pods("d", 4, "1500m")),
			template: templateInfo("4")},
		{name: "interacting groups and max nodes",
			pods:     concat(pods("a", 45, "700m"), pods("anti", 9, "300m", antiAffinity), pods("b", 30, "300m")),
			template: templateInfo("4"), limits: Limits{MaxNodes: 14}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := newSim(t)
			if tc.limits.MaxNodes == 0 {
				tc.limits.MaxNodes = 1000
			}
			groups := GroupPods(tc.pods)
			want := outcomeOf(referenceEstimate(t, sim, groups, tc.template, tc.limits))
			est, err := New(sim).Estimate(context.Background(), groups, tc.template, "ng", tc.limits)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, outcomeOf(est)); diff != "" {
				t.Errorf("estimate differs from pod-by-pod placement (-want +got):\n%s", diff)
			}
			if sim.Snapshot().Len() != 0 || sim.Snapshot().Forked() {
				t.Errorf("the estimate left %d nodes in the snapshot", sim.Snapshot().Len())
			}
		})
	}
}

// TestEstimateMatchesPodByPodRandom compares random workloads of
// non-interacting groups, with the odd interacting one, against the reference.
func TestEstimateMatchesPodByPodRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 23))
	templates := []string{"2", "4", "6", "16", "32"}
	sim := newSim(t)
	for i := range 25 {
		var ps []*apiv1.Pod
		for g := range 1 + rng.IntN(7) {
			var mutate []func(*apiv1.Pod)
			if rng.IntN(3) == 0 {
				mutate = append(mutate, memory(fmt.Sprintf("%dMi", 100+rng.IntN(6000))))
			}
			if rng.IntN(12) == 0 {
				mutate = append(mutate, antiAffinity)
			}
			ps = append(ps, pods(fmt.Sprintf("c%d-g%d", i, g), 1+rng.IntN(90), fmt.Sprintf("%dm", 10+rng.IntN(3000)), mutate...)...)
		}
		var dsPods []*apiv1.Pod
		if rng.IntN(2) == 0 {
			dsPods = pods("ds", 1, fmt.Sprintf("%dm", 100+rng.IntN(900)))
		}
		tmpl := templateInfo(templates[rng.IntN(len(templates))], dsPods...)
		limits := Limits{MaxNodes: 1000}
		switch rng.IntN(4) {
		case 1:
			limits.MaxNodes = 1 + rng.IntN(30)
		case 2:
			limits.MaxMilliCPU = int64(1+rng.IntN(40)) * 2000
		case 3:
			limits.MaxMemoryBytes = int64(1+rng.IntN(40)) * 10 << 30
		}
		groups := GroupPods(ps)
		want := outcomeOf(referenceEstimate(t, sim, groups, tmpl, limits))
		est, err := New(sim).Estimate(context.Background(), groups, tmpl, "ng", limits)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, outcomeOf(est)); diff != "" {
			t.Errorf("case %d (template %s cpu, limits %+v): estimate differs from pod-by-pod placement (-want +got):\n%s",
				i, tmpl.Node.Status.Capacity.Cpu(), limits, diff)
		}
	}
}
