package kwok

import (
	"context"
	"strings"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// driftConfig is a config of three groups: "web" and "batch" change between
// the configs of TestDriftAfterRestartWithAnotherConfig, "steady" only in
// what is not drift.
const driftConfig = `
nodeGroups:
- name: web
  maxSize: 10
  template:
    labels: {tier: web}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
- name: batch
  maxSize: 10
  template:
    capacity: {cpu: "8", memory: 32Gi, pods: "110"}
- name: steady
  maxSize: 10
  pricePerHour: 0.2
  template:
    annotations: {team: a}
    capacity: {cpu: "2", memory: 8Gi, pods: "110"}
`

// driftConfigChanged: web gets another label, batch a taint; steady a new
// price, max size and annotation, and its quantities written another way.
const driftConfigChanged = `
nodeGroups:
- name: web
  maxSize: 10
  template:
    labels: {tier: web, disk: ssd}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
- name: batch
  maxSize: 10
  template:
    taints: [{key: dedicated, value: batch, effect: NoSchedule}]
    capacity: {cpu: "8", memory: 32Gi, pods: "110"}
- name: steady
  maxSize: 20
  pricePerHour: 0.5
  template:
    annotations: {team: b}
    capacity: {cpu: 2000m, memory: "8589934592", pods: "110"}
`

// buildFromConfigMap builds the provider as the autoscaler starts it: the
// config from the ConfigMap kwok-provider-config. It returns the provider
// and a function that stops it, as the process's end does.
func buildFromConfigMap(t *testing.T, client *fake.Clientset) (*Provider, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cp, err := Build(ctx, cloudprovider.BuildOptions{KubeClient: client, Options: cloudprovider.Options{Namespace: testNamespace}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	p := cp.(*Provider)
	stop := func() { cancel(); p.Stop() }
	t.Cleanup(stop)
	return p, stop
}

func setConfigMap(t *testing.T, client *fake.Clientset, config string) {
	t.Helper()
	cm := &apiv1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Namespace: testNamespace},
		Data: map[string]string{"config": config}}
	ctx := context.Background()
	if _, err := client.CoreV1().ConfigMaps(testNamespace).Get(ctx, ConfigMapName, metav1.GetOptions{}); err == nil {
		_, err = client.CoreV1().ConfigMaps(testNamespace).Update(ctx, cm, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, err := client.CoreV1().ConfigMaps(testNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// nodesByGroup lists the cluster's Nodes by their group annotation.
func nodesByGroup(t *testing.T, client *fake.Clientset) map[string][]*apiv1.Node {
	t.Helper()
	list, err := client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]*apiv1.Node{}
	for i := range list.Items {
		n := &list.Items[i]
		out[n.Annotations[NodeGroupAnnotation]] = append(out[n.Annotations[NodeGroupAnnotation]], n)
	}
	return out
}

// drifted asks the group of node whether it drifted.
func drifted(t *testing.T, p *Provider, node *apiv1.Node) (bool, string, error) {
	t.Helper()
	ctx := context.Background()
	ng, err := p.NodeGroupForNode(ctx, node)
	if err != nil || ng == nil {
		t.Fatalf("node %s: no node group (%v)", node.Name, err)
	}
	return ng.(cloudprovider.DriftDetector).Drifted(ctx, node)
}

// TestDriftAfterRestartWithAnotherConfig: the config is read when the
// autoscaler starts, so a template changes when it restarts with another
// ConfigMap. The Nodes made before are then drifted where their group's
// template changed (a label, a taint), and not where only the price, the
// sizes, the annotations or the spelling of the quantities did; the Nodes
// made after the restart are not drifted.
func TestDriftAfterRestartWithAnotherConfig(t *testing.T) {
	client := fake.NewClientset()
	setConfigMap(t, client, driftConfig)
	p, stop := buildFromConfigMap(t, client)
	ctx := context.Background()
	for _, g := range []string{"web", "batch", "steady"} {
		if err := p.groups[g].IncreaseSize(ctx, 2); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "6 nodes", func() bool {
		by := nodesByGroup(t, client)
		return len(by["web"]) == 2 && len(by["batch"]) == 2 && len(by["steady"]) == 2
	})
	for g, nodes := range nodesByGroup(t, client) {
		for _, n := range nodes {
			if !strings.HasPrefix(n.Annotations[TemplateHashAnnotation], templateHashVersion) {
				t.Errorf("node %s of %s has no template hash: %v", n.Name, g, n.Annotations)
			}
			if d, why, err := drifted(t, p, n); d || err != nil {
				t.Errorf("node %s of %s drifted before any change: %v %q %v", n.Name, g, d, why, err)
			}
		}
	}

	stop()
	setConfigMap(t, client, driftConfigChanged)
	p, _ = buildFromConfigMap(t, client)
	want := map[string]bool{"web": true, "batch": true, "steady": false}
	for g, nodes := range nodesByGroup(t, client) {
		for _, n := range nodes {
			d, why, err := drifted(t, p, n)
			if err != nil {
				t.Fatalf("node %s of %s: %v", n.Name, g, err)
			}
			if d != want[g] {
				t.Errorf("node %s of %s: drifted %v (%q), want %v", n.Name, g, d, why, want[g])
			}
			if d && !strings.Contains(why, "kwok template") {
				t.Errorf("node %s: why %q does not name the template", n.Name, why)
			}
		}
	}

	// A node made from the new template is not drifted.
	if err := p.groups["web"].IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "3 web nodes", func() bool { return len(nodesByGroup(t, client)["web"]) == 3 })
	fresh := 0
	for _, n := range nodesByGroup(t, client)["web"] {
		if d, _, err := drifted(t, p, n); err == nil && !d {
			fresh++
		}
	}
	if fresh != 1 {
		t.Errorf("%d web nodes not drifted after the new one, want 1", fresh)
	}
}

// TestDriftUnsureMeansNotDrifted: a Node without the annotation (made by
// an older provider, or by hand) or with a hash of another version, and a
// node of another group, are not drifted, with an error.
func TestDriftUnsureMeansNotDrifted(t *testing.T) {
	client := fake.NewClientset()
	_, g := newTestProvider(t, client, oneGroup)
	ctx := context.Background()
	if err := g.IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "1 node", func() bool { return len(nodesByGroup(t, client)["pool"]) == 1 })
	node := nodesByGroup(t, client)["pool"][0]

	old := node.DeepCopy()
	delete(old.Annotations, TemplateHashAnnotation)
	other := node.DeepCopy()
	other.Annotations[TemplateHashAnnotation] = "v0-0123"
	for name, n := range map[string]*apiv1.Node{"no annotation": old, "another hash version": other} {
		d, _, err := g.Drifted(ctx, n)
		if d || err == nil {
			t.Errorf("%s: drifted %v, err %v; want not drifted, with an error", name, d, err)
		}
	}
	stranger := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "stranger",
		Annotations: map[string]string{TemplateHashAnnotation: node.Annotations[TemplateHashAnnotation]}},
		Spec: apiv1.NodeSpec{ProviderID: "kwok://stranger"}}
	if d, _, err := g.Drifted(ctx, stranger); d || err == nil {
		t.Errorf("a node of no group: drifted %v, err %v; want not drifted, with an error", d, err)
	}
	if d, why, err := g.Drifted(ctx, node); d || err != nil {
		t.Errorf("the group's own node: drifted %v (%q), err %v", d, why, err)
	}
}

// TestTemplateHashCoversWhatMakesANode: each template field that shapes a
// Node changes the hash; what does not shape one leaves it.
func TestTemplateHashCoversWhatMakesANode(t *testing.T) {
	base := func() NodeGroupConfig {
		cfg, err := ParseConfig([]byte(oneGroup))
		if err != nil {
			t.Fatal(err)
		}
		return cfg.NodeGroups[0]
	}
	hash := func(c NodeGroupConfig) string { return (&NodeGroup{cfg: c}).currentTemplateHash() }
	want := hash(base())
	for name, tc := range map[string]struct {
		change  func(*NodeGroupConfig)
		drifted bool
	}{
		"a label": {func(c *NodeGroupConfig) { c.Template.Labels = map[string]string{"a": "b"} }, true},
		"a taint": {func(c *NodeGroupConfig) {
			c.Template.Taints = []apiv1.Taint{{Key: "k", Effect: apiv1.TaintEffectNoSchedule}}
		}, true},
		"the capacity":    {func(c *NodeGroupConfig) { c.Template.Capacity[apiv1.ResourceCPU] = resource.MustParse("8") }, true},
		"the allocatable": {func(c *NodeGroupConfig) { c.Template.Allocatable[apiv1.ResourceMemory] = resource.MustParse("15Gi") }, true},
		"the instance type": {func(c *NodeGroupConfig) {
			c.Template.Labels = map[string]string{"node.kubernetes.io/instance-type": "bigger"}
		}, true},
		"the price":     {func(c *NodeGroupConfig) { c.PricePerHour = 3 }, false},
		"the sizes":     {func(c *NodeGroupConfig) { c.MinSize, c.MaxSize = 1, 7 }, false},
		"an annotation": {func(c *NodeGroupConfig) { c.Template.Annotations = map[string]string{"a": "b"} }, false},
		"the faults":    {func(c *NodeGroupConfig) { c.Faults.CreationFailureRate = 0.5 }, false},
		"cpu in millis": {func(c *NodeGroupConfig) { c.Template.Capacity[apiv1.ResourceCPU] = resource.MustParse("4000m") }, false},
		"memory in bytes": {func(c *NodeGroupConfig) {
			c.Template.Capacity[apiv1.ResourceMemory] = resource.MustParse("17179869184")
		}, false},
	} {
		c := base()
		tc.change(&c)
		if got := hash(c); (got != want) != tc.drifted {
			t.Errorf("%s: hash %s, before %s; want changed=%v", name, got, want, tc.drifted)
		}
	}
}
