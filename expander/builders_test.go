package expander

import (
	"strconv"
	"testing"

	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/internal/testbuild"
)

// pods returns n pods with the same requests.
func pods(n int, cpu, memory string) []*apiv1.Pod {
	out := make([]*apiv1.Pod, n)
	for i := range out {
		out[i] = testbuild.Pod("p").Req(cpu, memory).Obj()
	}
	return out
}

// templateNode is a node of the given capacity; allocatable is a little smaller.
func templateNode(name, cpu, memory string) *apiv1.Node {
	return testbuild.Node(name).Capacity(cpu, memory).Allocatable("100m", "100Mi").Obj()
}

// world is a fake provider whose groups' templates are also the NodeInfos.
type world struct {
	provider  *fake.Provider
	groups    map[string]cloudprovider.NodeGroup
	nodeInfos map[string]*cloudprovider.NodeInfo
}

func newWorld() *world {
	return &world{provider: fake.NewProvider(), groups: map[string]cloudprovider.NodeGroup{},
		nodeInfos: map[string]*cloudprovider.NodeInfo{}}
}

// group adds a node group; a nil template gets no NodeInfo.
func (w *world) group(id string, template *apiv1.Node) *world {
	w.groups[id] = w.provider.AddNodeGroup(id, 0, 100, 0, template)
	if template != nil {
		w.nodeInfos[id] = &cloudprovider.NodeInfo{Node: template}
	}
	return w
}

// option is an option of group id; it fails the test for unknown groups.
func (w *world) option(t *testing.T, id string, nodeCount int, ps ...*apiv1.Pod) Option {
	t.Helper()
	g, ok := w.groups[id]
	if !ok {
		t.Fatalf("no group %q", id)
	}
	return Option{NodeGroup: g, NodeCount: nodeCount, Pods: ps, Debug: id}
}

// optionSpec describes an option in a test table.
type optionSpec struct {
	group string
	nodes int
	pods  []*apiv1.Pod
}

func (w *world) options(t *testing.T, specs []optionSpec) []Option {
	t.Helper()
	out := make([]Option, 0, len(specs))
	for _, s := range specs {
		out = append(out, w.option(t, s.group, s.nodes, s.pods...))
	}
	return out
}

// ids names the options by "group/nodeCount", which is what tests compare.
func ids(options []Option) []string {
	out := []string{}
	for _, o := range options {
		out = append(out, o.NodeGroup.Id()+"/"+strconv.Itoa(o.NodeCount))
	}
	return out
}

func id(o *Option) string {
	if o == nil {
		return "<nil>"
	}
	return ids([]Option{*o})[0]
}

// last always picks the last candidate, making random choices deterministic.
func last(n int) int { return n - 1 }
