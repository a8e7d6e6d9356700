package expander

import (
	"strconv"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
)

// podBuilder builds pods fluently: makePod("p").req("1", "2Gi").obj().
type podBuilder struct{ pod *apiv1.Pod }

func makePod(name string) *podBuilder {
	return &podBuilder{pod: &apiv1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec:       apiv1.PodSpec{Containers: []apiv1.Container{{Name: "c"}}},
	}}
}

func resources(cpu, memory string) apiv1.ResourceList {
	rl := apiv1.ResourceList{}
	if cpu != "" {
		rl[apiv1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		rl[apiv1.ResourceMemory] = resource.MustParse(memory)
	}
	return rl
}

// req sets the requests of the first container.
func (b *podBuilder) req(cpu, memory string) *podBuilder {
	b.pod.Spec.Containers[0].Resources.Requests = resources(cpu, memory)
	return b
}

// container adds a regular container.
func (b *podBuilder) container(cpu, memory string) *podBuilder {
	b.pod.Spec.Containers = append(b.pod.Spec.Containers,
		apiv1.Container{Name: "c" + string(rune('a'+len(b.pod.Spec.Containers))), Resources: apiv1.ResourceRequirements{Requests: resources(cpu, memory)}})
	return b
}

// initContainer adds an init container; sidecar makes it restartable.
func (b *podBuilder) initContainer(cpu, memory string, sidecar bool) *podBuilder {
	c := apiv1.Container{Name: "i", Resources: apiv1.ResourceRequirements{Requests: resources(cpu, memory)}}
	if sidecar {
		always := apiv1.ContainerRestartPolicyAlways
		c.RestartPolicy = &always
	}
	b.pod.Spec.InitContainers = append(b.pod.Spec.InitContainers, c)
	return b
}

func (b *podBuilder) overhead(cpu, memory string) *podBuilder {
	b.pod.Spec.Overhead = resources(cpu, memory)
	return b
}

func (b *podBuilder) gpu(n string) *podBuilder {
	b.pod.Spec.Containers[0].Resources.Limits = apiv1.ResourceList{"nvidia.com/gpu": resource.MustParse(n)}
	return b
}

func (b *podBuilder) obj() *apiv1.Pod { return b.pod }

// pods returns n pods with the same requests.
func pods(n int, cpu, memory string) []*apiv1.Pod {
	out := make([]*apiv1.Pod, n)
	for i := range out {
		out[i] = makePod("p").req(cpu, memory).obj()
	}
	return out
}

// templateNode is a node of the given capacity; allocatable is a little smaller.
func templateNode(name, cpu, memory string) *apiv1.Node {
	n := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	n.Status.Capacity = resources(cpu, memory)
	n.Status.Allocatable = resources("100m", "100Mi")
	return n
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
