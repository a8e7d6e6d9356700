package expander

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	clocktesting "k8s.io/utils/clock/testing"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/internal/testbuild"
)

// fakePricing prices a node by its cores (or a fixed hourly price by node
// name) and a pod by its requested cores, pro rata of the window.
type fakePricing struct {
	nodePerCoreHour float64
	nodeHourly      map[string]float64
	podPerCoreHour  float64
	nodeErr         map[string]error

	mu      sync.Mutex
	windows map[[2]time.Time]bool
}

func (f *fakePricing) record(start, end time.Time) float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.windows == nil {
		f.windows = map[[2]time.Time]bool{}
	}
	f.windows[[2]time.Time{start, end}] = true
	return end.Sub(start).Hours()
}

func (f *fakePricing) NodePrice(_ context.Context, node *apiv1.Node, start, end time.Time) (float64, error) {
	hours := f.record(start, end)
	if err := f.nodeErr[node.Name]; err != nil {
		return 0, err
	}
	if p, ok := f.nodeHourly[node.Name]; ok {
		return p * hours, nil
	}
	return f.nodePerCoreHour * float64(amount(node.Status.Capacity, apiv1.ResourceCPU)) / 1000 * hours, nil
}

func (f *fakePricing) PodPrice(_ context.Context, pod *apiv1.Pod, start, end time.Time) (float64, error) {
	hours := f.record(start, end)
	return f.podPerCoreHour * float64(podRequest(pod, apiv1.ResourceCPU)) / 1000 * hours, nil
}

// nodeList is a NodeLister of n nodes.
type nodeList int

func (n nodeList) List(labels.Selector) ([]*apiv1.Node, error) {
	out := make([]*apiv1.Node, n)
	for i := range out {
		out[i] = &apiv1.Node{}
	}
	return out, nil
}

// missingGroup is a node group that does not exist yet.
type missingGroup struct{ cloudprovider.NodeGroup }

func (missingGroup) Exist() bool { return false }

// reservedGroup is a node group whose next left nodes are already paid for.
type reservedGroup struct {
	cloudprovider.NodeGroup
	left int
}

func (r reservedGroup) ReservedNodesLeft() int { return r.left }

func gpuNode(name, cpu, memory string) *apiv1.Node {
	n := templateNode(name, cpu, memory)
	n.Labels["fake.gpu/type"] = "t4" // the fake provider's GPULabel
	return n
}

func TestPrice(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name    string
		pricing *fakePricing
		nodes   NodeLister
		static  int // target size of an extra group, counted when nodes is nil
		options []optionSpec
		missing string // group that does not exist yet
		// reserved are groups with nodes already paid for, by how many.
		reserved map[string]int
		want     []string
	}{
		{name: "the cheaper node wins", pricing: &fakePricing{podPerCoreHour: 0.05,
			nodeHourly: map[string]float64{"std4": 0.20, "std4b": 0.15}},
			options: []optionSpec{
				{group: "std4", nodes: 1, pods: pods(3, "1", "1Gi")},
				{group: "std4b", nodes: 1, pods: pods(3, "1", "1Gi")},
			}, want: []string{"std4b/1"}},
		{name: "the price counts per pod served", pricing: &fakePricing{podPerCoreHour: 0.05,
			nodeHourly: map[string]float64{"std2": 0.10, "std8": 0.30}},
			options: []optionSpec{
				// 2 nodes for 0.20 serve 2 pods; one node for 0.30 serves 6
				{group: "std2", nodes: 2, pods: pods(2, "1", "1Gi")},
				{group: "std8", nodes: 1, pods: pods(6, "1", "1Gi")},
			}, want: []string{"std8/1"}},
		{name: "the anchor pod keeps a tiny pod on a cheap node from looking wasteful",
			// without the anchor: std4 0.02/0.001 = 20 against std8 1.0/0.5 = 2
			pricing: &fakePricing{podPerCoreHour: 0.05, nodeHourly: map[string]float64{"std4": 0.02, "std8": 1.0}},
			options: []optionSpec{
				{group: "std8", nodes: 1, pods: pods(10, "1", "1Gi")},
				{group: "std4", nodes: 1, pods: pods(1, "20m", "1Gi")},
			}, want: []string{"std4/1"}},
		{name: "equal price per core: the size near the small cluster's preference wins",
			pricing: &fakePricing{nodePerCoreHour: 0.04, podPerCoreHour: 0.04},
			options: []optionSpec{
				{group: "std16", nodes: 1, pods: pods(16, "1", "1Gi")},
				{group: "std2", nodes: 8, pods: pods(16, "1", "1Gi")},
			}, want: []string{"std2/8"}},
		{name: "equal price per core: a big cluster prefers big nodes",
			pricing: &fakePricing{nodePerCoreHour: 0.04, podPerCoreHour: 0.04}, nodes: nodeList(150),
			options: []optionSpec{
				{group: "std16", nodes: 1, pods: pods(16, "1", "1Gi")},
				{group: "std2", nodes: 8, pods: pods(16, "1", "1Gi")},
			}, want: []string{"std16/1"}},
		{name: "without a node lister, the node groups' target sizes make the cluster size",
			pricing: &fakePricing{nodePerCoreHour: 0.04, podPerCoreHour: 0.04}, static: 40,
			options: []optionSpec{
				{group: "std16", nodes: 1, pods: pods(16, "1", "1Gi")},
				{group: "std2", nodes: 8, pods: pods(16, "1", "1Gi")},
			}, want: []string{"std16/1"}},
		{name: "a GPU node loses when no pod needs a GPU", pricing: &fakePricing{podPerCoreHour: 0.05,
			nodeHourly: map[string]float64{"gpu4": 0.05, "std4": 0.50}},
			options: []optionSpec{
				{group: "gpu4", nodes: 1, pods: pods(2, "1", "1Gi")},
				{group: "std4", nodes: 1, pods: pods(2, "1", "1Gi")},
			}, want: []string{"std4/1"}},
		{name: "a GPU node wins when a pod needs its GPU", pricing: &fakePricing{podPerCoreHour: 0.05,
			nodeHourly: map[string]float64{"gpu4": 0.05, "std4": 0.50}},
			options: []optionSpec{
				{group: "gpu4", nodes: 1, pods: append(pods(1, "1", "1Gi"), testbuild.Pod("g").Req("1", "1Gi").GPU("1").Obj())},
				{group: "std4", nodes: 1, pods: pods(2, "1", "1Gi")},
			}, want: []string{"gpu4/1"}},
		{name: "a group that does not exist yet costs double", pricing: &fakePricing{podPerCoreHour: 0.05,
			nodeHourly: map[string]float64{"std4": 0.20, "std4b": 0.15}}, missing: "std4b",
			options: []optionSpec{
				{group: "std4", nodes: 1, pods: pods(3, "1", "1Gi")},
				{group: "std4b", nodes: 1, pods: pods(3, "1", "1Gi")},
			}, want: []string{"std4/1"}},
		{name: "reserved capacity already paid for wins over a cheaper node", pricing: &fakePricing{podPerCoreHour: 0.05,
			nodeHourly: map[string]float64{"std4": 0.20, "std4b": 0.15}}, reserved: map[string]int{"std4": 2},
			options: []optionSpec{
				{group: "std4", nodes: 2, pods: pods(6, "1", "1Gi")},
				{group: "std4b", nodes: 2, pods: pods(6, "1", "1Gi")},
			}, want: []string{"std4/2"}},
		{name: "nodes beyond the reservation are priced", pricing: &fakePricing{podPerCoreHour: 0.05,
			// std4: 3 of 4 nodes at 0.20 = 0.60; std4b: 4 at 0.10 = 0.40
			nodeHourly: map[string]float64{"std4": 0.20, "std4b": 0.10}}, reserved: map[string]int{"std4": 1},
			options: []optionSpec{
				{group: "std4", nodes: 4, pods: pods(12, "1", "1Gi")},
				{group: "std4b", nodes: 4, pods: pods(12, "1", "1Gi")},
			}, want: []string{"std4b/4"}},
		{name: "a reservation used up counts for nothing", pricing: &fakePricing{podPerCoreHour: 0.05,
			nodeHourly: map[string]float64{"std4": 0.20, "std4b": 0.15}}, reserved: map[string]int{"std4": 0},
			options: []optionSpec{
				{group: "std4", nodes: 1, pods: pods(3, "1", "1Gi")},
				{group: "std4b", nodes: 1, pods: pods(3, "1", "1Gi")},
			}, want: []string{"std4b/1"}},
		{name: "ties are kept", pricing: &fakePricing{nodePerCoreHour: 0.04, podPerCoreHour: 0.04},
			options: []optionSpec{
				{group: "std4", nodes: 1, pods: pods(3, "1", "1Gi")},
				{group: "std4b", nodes: 1, pods: pods(3, "1", "1Gi")},
				{group: "std8", nodes: 1, pods: pods(3, "1", "1Gi")},
			}, want: []string{"std4/1", "std4b/1"}},
		{name: "options that cannot be priced are skipped", pricing: &fakePricing{podPerCoreHour: 0.05,
			nodeHourly: map[string]float64{"std4": 0.20, "std4b": 0.15}, nodeErr: map[string]error{"std4b": boom}},
			options: []optionSpec{
				{group: "std4", nodes: 1, pods: pods(3, "1", "1Gi")},
				{group: "std4b", nodes: 1, pods: pods(3, "1", "1Gi")},
				{group: "no-template", nodes: 1, pods: pods(3, "1", "1Gi")},
			}, want: []string{"std4/1"}},
		{name: "every option is kept when none can be priced", pricing: &fakePricing{podPerCoreHour: 0.05,
			nodeErr: map[string]error{"std4": boom, "std4b": boom}},
			options: []optionSpec{
				{group: "std4", nodes: 1, pods: pods(3, "1", "1Gi")},
				{group: "std4b", nodes: 1, pods: pods(3, "1", "1Gi")},
				{group: "no-template", nodes: 1, pods: pods(3, "1", "1Gi")},
			}, want: []string{"std4/1", "std4b/1", "no-template/1"}},
	}
	now := time.Date(2026, 11, 22, 10, 30, 0, 0, time.UTC)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld().
				group("std2", templateNode("std2", "2", "8Gi")).
				group("std4", templateNode("std4", "4", "16Gi")).
				group("std4b", templateNode("std4b", "4", "16Gi")).
				group("std8", templateNode("std8", "8", "32Gi")).
				group("std16", templateNode("std16", "16", "64Gi")).
				group("gpu4", gpuNode("gpu4", "4", "16Gi")).
				group("no-template", nil)
			w.provider.AddNodeGroup("static", tc.static, tc.static, tc.static, nil)
			if tc.missing != "" {
				w.groups[tc.missing] = missingGroup{w.groups[tc.missing]}
			}
			for g, left := range tc.reserved {
				w.groups[g] = reservedGroup{w.groups[g], left}
			}
			w.provider.SetPricing(tc.pricing)
			p, err := newPrice(t.Context(), w.provider, tc.nodes, clocktesting.NewFakePassiveClock(now))
			if err != nil {
				t.Fatal(err)
			}
			got := p.BestOptions(t.Context(), w.options(t, tc.options), w.nodeInfos)
			if diff := cmp.Diff(tc.want, ids(got)); diff != "" {
				t.Errorf("BestOptions (-want +got):\n%s", diff)
			}
			want := map[[2]time.Time]bool{{now, now.Add(time.Hour)}: true}
			if diff := cmp.Diff(want, tc.pricing.windows); diff != "" {
				t.Errorf("priced windows (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPriceSingleOptionIsKeptUnpriced(t *testing.T) {
	w := newWorld().group("std4", templateNode("std4", "4", "16Gi"))
	pricing := &fakePricing{nodeErr: map[string]error{"std4": errors.New("boom")}}
	w.provider.SetPricing(pricing)
	p, err := newPrice(t.Context(), w.provider, nil, clocktesting.NewFakePassiveClock(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	got := p.BestOptions(t.Context(), []Option{w.option(t, "std4", 1)}, w.nodeInfos)
	if diff := cmp.Diff([]string{"std4/1"}, ids(got)); diff != "" {
		t.Errorf("BestOptions (-want +got):\n%s", diff)
	}
}

func TestPreferredCores(t *testing.T) {
	got := map[int]float64{}
	for _, n := range []int{0, 2, 3, 9, 10, 29, 30, 99, 100, 5000} {
		got[n] = preferredCores(n)
	}
	want := map[int]float64{0: 2, 2: 2, 3: 4, 9: 4, 10: 8, 29: 8, 30: 16, 99: 16, 100: 32, 5000: 32}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("preferredCores (-want +got):\n%s", diff)
	}
}
