package processors

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
)

func namedPods(names ...string) []*apiv1.Pod {
	out := make([]*apiv1.Pod, len(names))
	for i, n := range names {
		out[i] = &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns-" + n[:1], Name: n}}
	}
	return out
}

func names(pods []*apiv1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}

// podFunc adapts a function to PodListProcessor.
type podFunc func([]*apiv1.Pod) []*apiv1.Pod

func (f podFunc) ProcessPods(_ context.Context, _ *Loop, pods []*apiv1.Pod) []*apiv1.Pod {
	return f(pods)
}

// The pod lists run in order from the loop's pending pods, each on what the
// one before returned.
func TestPodListsRunInOrder(t *testing.T) {
	var seen [][]string
	record := func(drop string) PodListProcessor {
		return podFunc(func(pods []*apiv1.Pod) []*apiv1.Pod {
			seen = append(seen, names(pods))
			return slices.DeleteFunc(slices.Clone(pods), func(p *apiv1.Pod) bool { return p.Name == drop })
		})
	}
	s := Set{PodLists: []PodListProcessor{record("a1"), record("b1"), record("")}}
	loop := &Loop{PendingPods: namedPods("a1", "b1", "c1")}
	got := names(s.Pods(context.Background(), loop))
	want := [][]string{{"a1", "b1", "c1"}, {"b1", "c1"}, {"c1"}}
	if fmt.Sprint(seen) != fmt.Sprint(want) || fmt.Sprint(got) != "[c1]" {
		t.Errorf("processors saw %v and returned %v; want %v and [c1]", seen, got, want)
	}
	if got := names(Set{}.Pods(context.Background(), loop)); len(got) != 3 {
		t.Errorf("the zero Set passed %v, want every pending pod", got)
	}
}

func TestIgnoreNamespaces(t *testing.T) {
	pods := namedPods("a1", "b1", "a2", "c1")
	got := IgnoreNamespaces{Namespaces: []string{"ns-a", "ns-c"}}.ProcessPods(context.Background(), &Loop{}, pods)
	if fmt.Sprint(names(got)) != "[b1]" {
		t.Errorf("kept %v, want [b1]", names(got))
	}
	if got := (IgnoreNamespaces{}).ProcessPods(context.Background(), &Loop{}, pods); len(got) != 4 {
		t.Errorf("no namespace ignored, yet %d of 4 pods kept", len(got))
	}
	if len(pods) != 4 || pods[0].Name != "a1" {
		t.Error("the input list was modified")
	}
}

// groupFunc adapts a function to NodeGroupListProcessor.
type groupFunc func([]cloudprovider.NodeGroup) map[string]string

func (f groupFunc) ExcludeNodeGroups(_ context.Context, _ *Loop, g []cloudprovider.NodeGroup) map[string]string {
	return f(g)
}

// Each node-group processor sees only the groups no earlier one excluded;
// the first reason given for a group is kept.
func TestExcludedNodeGroups(t *testing.T) {
	provider := fakeprovider.NewProvider()
	for _, id := range []string{"a", "b", "c"} {
		provider.AddNodeGroup(id, 0, 1, 0, nil)
	}
	groups, _ := provider.NodeGroups(context.Background())
	var secondSaw []string
	s := Set{NodeGroups: []NodeGroupListProcessor{
		groupFunc(func([]cloudprovider.NodeGroup) map[string]string { return map[string]string{"a": "first"} }),
		groupFunc(func(g []cloudprovider.NodeGroup) map[string]string {
			for _, ng := range g {
				secondSaw = append(secondSaw, ng.Id())
			}
			return map[string]string{"a": "second", "b": ""}
		}),
	}}
	got := s.ExcludedNodeGroups(context.Background(), &Loop{NodeGroups: groups})
	if got["a"] != "first" || got["b"] == "" || len(got) != 2 {
		t.Errorf("excluded = %v, want a (first) and b with a default reason", got)
	}
	if fmt.Sprint(secondSaw) != "[b c]" {
		t.Errorf("the second processor saw %v, want [b c]", secondSaw)
	}
	if got := (Set{}).ExcludedNodeGroups(context.Background(), &Loop{NodeGroups: groups}); got != nil {
		t.Errorf("no processor, yet excluded %v", got)
	}
}

type repair struct {
	changed bool
	calls   *int
}

func (r repair) Repair(context.Context, *Loop) bool { *r.calls++; return r.changed }

// Repairs run in order and stop at the first that changed the cluster.
func TestRepairStopsAtTheFirstChange(t *testing.T) {
	var a, b, c int
	s := Set{Repairs: []RepairProcessor{repair{false, &a}, repair{true, &b}, repair{true, &c}}}
	if !s.Repair(context.Background(), &Loop{Now: time.Now()}) || a != 1 || b != 1 || c != 0 {
		t.Errorf("calls %d %d %d, want 1 1 0 and a change reported", a, b, c)
	}
	if (Set{Repairs: []RepairProcessor{repair{false, &a}}}).Repair(context.Background(), &Loop{}) {
		t.Error("no repair changed anything, yet a change was reported")
	}
}
