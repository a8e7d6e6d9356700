package scaledown

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// minimumsFunc is a MinimumSource from a function.
type minimumsFunc func(context.Context) ([]Minimum, error)

func (f minimumsFunc) Minimums(ctx context.Context) ([]Minimum, error) { return f(ctx) }

func mustMinimum(t *testing.T, name string, sel *metav1.LabelSelector, res apiv1.ResourceList) Minimum {
	t.Helper()
	m, err := NewMinimum(name, sel, res, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestNewMinimum(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sel      *metav1.LabelSelector
		res      apiv1.ResourceList
		gpus     map[string]int64
		want     map[apiv1.ResourceName]int64
		wantErrs []string
	}{
		{name: "units", res: apiv1.ResourceList{"cpu": resource.MustParse("1500m"), "memory": resource.MustParse("2Gi"),
			"nodes": resource.MustParse("3"), "nvidia.com/gpu": resource.MustParse("4")},
			want: map[apiv1.ResourceName]int64{"cpu": 1500, "memory": 2 << 30, "nodes": 3, "nvidia.com/gpu": 4}},
		{name: "every problem named", sel: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "pool", Operator: "Near"}}},
			res: apiv1.ResourceList{"cpu": resource.MustParse("-1"), "nodes": resource.MustParse("1.5"),
				"memory": resource.MustParse("100Ei")},
			gpus: map[string]int64{"": 1, "t4": -2},
			wantErrs: []string{"selector", "resources[cpu]: -1 is negative", "resources[nodes]: 1500m is not a whole number",
				"is too large", "a GPU type is empty", "gpus[t4]: -2 is negative"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewMinimum("q", tc.sel, tc.res, tc.gpus)
			if len(tc.wantErrs) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, m.Resources); diff != "" {
					t.Errorf("resources (-want +got):\n%s", diff)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %v", tc.wantErrs)
			}
			for _, want := range tc.wantErrs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

func labelled(name, pool, cpu string, taints ...apiv1.Taint) *apiv1.Node {
	n := node(name, taints...)
	n.Labels = map[string]string{"pool": pool}
	n.Status.Capacity = apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse(cpu),
		apiv1.ResourceMemory: resource.MustParse("16Gi")}
	return n
}

// TestFloorsCountRemovalsTogether drives floorsLeft and take directly:
// the nodes offered in order, which of them go.
func TestFloorsCountRemovalsTogether(t *testing.T) {
	pool := func(p string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"pool": p}}
	}
	doomed := apiv1.Taint{Key: ToBeDeletedTaint, Effect: apiv1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name  string
		opts  func(*Options)
		extra func(t *testing.T) []Minimum
		nodes []*apiv1.Node
		offer []string
		want  map[string]string // kept node -> what keeps it
	}{
		{name: "cores minimum: one of three 4-core nodes may go",
			opts:  func(o *Options) { o.Cores.Min = 6 },
			nodes: []*apiv1.Node{labelled("a", "x", "4"), labelled("b", "x", "4"), labelled("c", "x", "4")},
			offer: []string{"a", "b", "c"},
			want:  map[string]string{"b": "cluster-wide: cpu", "c": "cluster-wide: cpu"}},
		{name: "a kept node takes nothing: a smaller one still goes",
			opts:  func(o *Options) { o.Cores.Min = 10 },
			nodes: []*apiv1.Node{labelled("big", "x", "8"), labelled("small", "x", "2"), labelled("c", "x", "4")},
			offer: []string{"big", "small"},
			want:  map[string]string{"big": "cluster-wide: cpu"}},
		{name: "a selector's minimum counts only its nodes",
			extra: func(t *testing.T) []Minimum {
				return []Minimum{mustMinimum(t, "web", pool("web"), apiv1.ResourceList{"nodes": resource.MustParse("2")})}
			},
			nodes: []*apiv1.Node{labelled("w1", "web", "4"), labelled("w2", "web", "4"), labelled("w3", "web", "4"),
				labelled("b1", "batch", "4"), labelled("b2", "batch", "4")},
			offer: []string{"w1", "b1", "w2", "b2", "w3"},
			want:  map[string]string{"w2": "web: nodes", "w3": "web: nodes"}},
		{name: "two minimums over one node: both named",
			opts: func(o *Options) { o.Cores.Min = 8 },
			extra: func(t *testing.T) []Minimum {
				return []Minimum{mustMinimum(t, "web", pool("web"), apiv1.ResourceList{"memory": resource.MustParse("32Gi")})}
			},
			nodes: []*apiv1.Node{labelled("w1", "web", "4"), labelled("w2", "web", "4")},
			offer: []string{"w1"},
			want:  map[string]string{"w1": "cluster-wide: cpu; web: memory"}},
		{name: "nodes being deleted and virtual-kubelet nodes count for nothing",
			opts: func(o *Options) { o.Cores.Min = 4 },
			nodes: func() []*apiv1.Node {
				vk := labelled("vk", "x", "100")
				vk.Labels["type"] = "virtual-kubelet"
				return []*apiv1.Node{labelled("a", "x", "4"), labelled("b", "x", "4"), labelled("gone", "x", "4", doomed), vk}
			}(),
			offer: []string{"a", "b", "vk"},
			want:  map[string]string{"b": "cluster-wide: cpu"}},
		{name: "below a minimum already: nothing it counts goes, the rest does",
			extra: func(t *testing.T) []Minimum {
				return []Minimum{mustMinimum(t, "gpus", nil, apiv1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")})}
			},
			nodes: func() []*apiv1.Node {
				g := labelled("gpu", "x", "4")
				g.Status.Capacity["nvidia.com/gpu"] = resource.MustParse("4")
				return []*apiv1.Node{g, labelled("plain", "x", "4")}
			}(),
			offer: []string{"gpu", "plain"},
			want:  map[string]string{"gpu": "gpus: nvidia.com/gpu"}},
		{name: "minimums of 0 keep nothing",
			opts: func(o *Options) { o.Cores = config.Range{Min: 0, Max: 10} },
			extra: func(t *testing.T) []Minimum {
				return []Minimum{mustMinimum(t, "zero", nil, apiv1.ResourceList{"cpu": resource.MustParse("0")})}
			},
			nodes: []*apiv1.Node{labelled("a", "x", "4")},
			offer: []string{"a"},
			want:  map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			if tc.opts != nil {
				tc.opts(&o)
			}
			var opts []PlannerOption
			if tc.extra != nil {
				extra := tc.extra(t)
				opts = append(opts, WithMinimums(minimumsFunc(func(context.Context) ([]Minimum, error) { return extra, nil })))
			}
			p := NewPlanner(o, nil, nil, nil, opts...)
			f := p.floorsLeft(context.Background(), Input{Nodes: tc.nodes})
			byName := map[string]*apiv1.Node{}
			for _, n := range tc.nodes {
				byName[n.Name] = n
			}
			got := map[string]string{}
			for _, name := range tc.offer {
				if over := f.take(byName[name], nil); len(over) > 0 {
					got[name] = strings.Join(over, "; ")
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("kept (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlannerKeepsNodesForAForksMinimum: three empty 4-core nodes, a
// fork's minimum of 2 nodes over them: one goes, the others are kept as
// MinimalResourceLimitExceeded with the minimum named; a minimum that
// cannot be read keeps every node (UnexpectedError).
func TestPlannerKeepsNodesForAForksMinimum(t *testing.T) {
	f := newFixture(t, 0, map[string]string{"a": "", "b": "", "c": ""}, nil)
	var readErr error
	f.planner.minimums = minimumsFunc(func(context.Context) ([]Minimum, error) {
		return []Minimum{mustMinimum(t, "baseline", nil, apiv1.ResourceList{"nodes": resource.MustParse("2")})}, readErr
	})
	f.plan(t, t0)
	plan := f.plan(t, t0.Add(11*time.Minute))
	if len(plan.Removable) != 1 {
		t.Fatalf("removable %v, want one (3 nodes, minimum 2)", names(plan.Removable))
	}
	kept := 0
	for name, r := range plan.Unremovable {
		if r != ReasonMinimalResourceLimit {
			continue
		}
		kept++
		if want := "would go below the minimum of baseline: nodes"; plan.Details[name] != want {
			t.Errorf("%s: detail %q, want %q", name, plan.Details[name], want)
		}
	}
	if kept != 2 {
		t.Errorf("%d nodes kept for the minimum, want 2: %v", kept, plan.Unremovable)
	}

	readErr = errors.New("informer not synced")
	plan = f.plan(t, t0.Add(12*time.Minute))
	if len(plan.Removable) != 0 {
		t.Errorf("removable %v with unreadable minimums, want none", names(plan.Removable))
	}
	for _, n := range []string{"a", "b", "c"} {
		if plan.Unremovable[n] != ReasonUnexpectedError {
			t.Errorf("%s: reason %q, want %q", n, plan.Unremovable[n], ReasonUnexpectedError)
		}
	}
}

// TestZeroOrMaxGroupKeepsTheMinimum: a zeroOrMaxNodeScaling group whose
// nodes would all go is kept whole when together they would take the
// cluster below --cores-total's minimum (each alone would not).
func TestZeroOrMaxGroupKeepsTheMinimum(t *testing.T) {
	f := newFixture(t, 0, map[string]string{"a": "", "b": "", "c": ""}, func(o *fixtureOptions) { o.Cores.Min = 6 })
	o := config.Defaults().NodeGroupDefaults
	o.ZeroOrMaxNodeScaling = true
	f.g.SetOptions(&o)
	f.plan(t, t0)
	plan := f.plan(t, t0.Add(11*time.Minute))
	if len(plan.Removable) != 0 {
		t.Fatalf("removable %v, want none (12 cores, minimum 6)", names(plan.Removable))
	}
	for _, n := range []string{"a", "b", "c"} {
		if plan.Unremovable[n] != ReasonMinimalResourceLimit {
			t.Errorf("%s: reason %q, want %q", n, plan.Unremovable[n], ReasonMinimalResourceLimit)
		}
	}
}

// TestTakeAllTakesNothingWhenOneIsKept: a zeroOrMaxNodeScaling group's
// nodes go together or not at all, and when kept they leave the headroom
// to the nodes after them.
func TestTakeAllTakesNothingWhenOneIsKept(t *testing.T) {
	o := DefaultOptions()
	o.Cores.Min = 6
	a, b, c := labelled("a", "x", "4"), labelled("b", "x", "4"), labelled("c", "x", "4")
	f := NewPlanner(o, nil, nil, nil).floorsLeft(context.Background(), Input{Nodes: []*apiv1.Node{a, b, c}})
	if over := f.takeAll([]*apiv1.Node{a, b}, nil); len(over) == 0 {
		t.Fatal("a and b went together; 4 cores would stay, minimum 6")
	}
	if over := f.take(c, nil); len(over) > 0 {
		t.Errorf("c kept (%v) after a and b were kept; 8 cores would stay, minimum 6", over)
	}
}
