package kwok

import (
	"context"
	"strings"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

const upstreamTemplatesList = `
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata:
    name: worker-a
    labels: {kubernetes.io/hostname: worker-a, node.kubernetes.io/instance-type: m5.xlarge, team: a}
    annotations:
      cluster-autoscaler.kwok.nodegroup/min-count: "1"
      cluster-autoscaler.kwok.nodegroup/max-count: "7"
      cluster-autoscaler.kwok.nodegroup/desired-count: "2"
  spec:
    taints: [{key: dedicated, value: a, effect: NoSchedule}]
  status:
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
    allocatable: {cpu: 3900m, memory: 15Gi, pods: "110"}
- apiVersion: v1
  kind: Node
  metadata:
    name: worker-b
    labels: {node.kubernetes.io/instance-type: m5.xlarge}
  status:
    capacity: {cpu: "8", memory: 32Gi, pods: "110"}
- apiVersion: v1
  kind: Node
  metadata: {name: ungrouped}
  status:
    capacity: {cpu: "2", memory: 8Gi, pods: "110"}
`

func upstreamClient(templatesKey, templates string, nodes ...*apiv1.Node) *fake.Clientset {
	c := fake.NewSimpleClientset(&apiv1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "kwok-provider-templates"},
		Data:       map[string]string{templatesKey: templates},
	})
	for _, n := range nodes {
		_, _ = c.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{})
	}
	return c
}

func TestUpstreamFormatFromConfigMap(t *testing.T) {
	cfgText := `
apiVersion: v1alpha1
readNodesFrom: configmap
nodegroups:
  fromNodeLabelKey: node.kubernetes.io/instance-type
nodes:
  gpuConfig:
    gpuLabelKey: k8s.amazonaws.com/accelerator
    availableGPUTypes: {nvidia-tesla-k80: {}}
configmap:
  name: kwok-provider-templates
`
	if !isUpstreamFormat([]byte(cfgText)) || isUpstreamFormat([]byte("nodeGroups: []")) {
		t.Fatal("the two formats are not told apart")
	}
	cfg, err := translateUpstream(context.Background(), upstreamClient("templates", upstreamTemplatesList), "ns", []byte(cfgText))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.NodeGroups) != 1 {
		t.Fatalf("groups %v, want one (m5.xlarge; the first node is its template, the ungrouped node none)", cfg.NodeGroups)
	}
	g := cfg.NodeGroups[0]
	if g.Name != "m5-xlarge" || g.MinSize != 1 || g.MaxSize != 7 || g.InitialSize != 2 {
		t.Errorf("group %s min %d max %d initial %d, want m5-xlarge 1 7 2", g.Name, g.MinSize, g.MaxSize, g.InitialSize)
	}
	if g.Template.Labels["team"] != "a" || g.Template.Labels["kubernetes.io/hostname"] != "" {
		t.Errorf("labels %v", g.Template.Labels)
	}
	if _, ok := g.Template.Annotations["cluster-autoscaler.kwok.nodegroup/min-count"]; ok {
		t.Errorf("sizing annotations copied to the nodes: %v", g.Template.Annotations)
	}
	if len(g.Template.Taints) != 2 || g.Template.Taints[1].Key != UpstreamTaintKey {
		t.Errorf("taints %v, want the node's and kwok-provider=true:NoSchedule", g.Template.Taints)
	}
	if q := g.Template.Allocatable[apiv1.ResourceCPU]; q.Cmp(resource.MustParse("3900m")) != 0 {
		t.Errorf("allocatable cpu %s", q.String())
	}
	if cfg.GPULabel != "k8s.amazonaws.com/accelerator" || len(cfg.AvailableGPUTypes) != 1 {
		t.Errorf("gpu config %q %v", cfg.GPULabel, cfg.AvailableGPUTypes)
	}
}

func TestUpstreamFormatFromClusterAndDocuments(t *testing.T) {
	// Nodes of the cluster, grouped by annotation, without the taint.
	n := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "real", Annotations: map[string]string{"pool": "Big_Pool"}},
		Status: apiv1.NodeStatus{Capacity: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("16"),
			apiv1.ResourceMemory: resource.MustParse("64Gi"), apiv1.ResourcePods: resource.MustParse("110")}}}
	cfg, err := translateUpstream(context.Background(), upstreamClient("templates", "", n), "ns", []byte(`
apiVersion: v1alpha1
readNodesFrom: cluster
nodegroups: {fromNodeAnnotationKey: pool}
nodes: {skipTaint: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	if g := cfg.NodeGroups[0]; g.Name != "big-pool" || g.MaxSize != 200 || len(g.Template.Taints) != 0 {
		t.Errorf("group %+v, want big-pool, max 200 (upstream's default), no taint", g)
	}
	// Several YAML documents of one Node each, under a custom key.
	docs := "apiVersion: v1\nkind: Node\nmetadata: {name: x, labels: {g: one}}\nstatus: {capacity: {cpu: '1', memory: 1Gi, pods: '10'}}\n---\n" +
		"apiVersion: v1\nkind: Node\nmetadata: {name: y, labels: {g: two}}\nstatus: {capacity: {cpu: '2', memory: 2Gi, pods: '10'}}\n"
	cfg, err = translateUpstream(context.Background(), upstreamClient("mine", docs), "ns", []byte(`
apiVersion: v1alpha1
nodegroups: {fromNodeLabelKey: g}
configmap: {name: kwok-provider-templates, key: mine}
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.NodeGroups) != 2 {
		t.Errorf("groups %v, want one and two", cfg.NodeGroups)
	}
}

func TestUpstreamFormatErrors(t *testing.T) {
	bad := strings.ReplaceAll(upstreamTemplatesList, `max-count: "7"`, `max-count: "many"`)
	for _, tc := range []struct{ name, cfg, templates, want string }{
		{"version", "apiVersion: v2\nnodegroups: {fromNodeLabelKey: a}", upstreamTemplatesList, "v1alpha1"},
		{"no grouping", "apiVersion: v1alpha1", upstreamTemplatesList, "fromNodeLabelKey or fromNodeAnnotationKey"},
		{"both groupings", "apiVersion: v1alpha1\nnodegroups: {fromNodeLabelKey: a, fromNodeAnnotationKey: b}", upstreamTemplatesList, "not both"},
		{"unknown source", "apiVersion: v1alpha1\nreadNodesFrom: disk\nnodegroups: {fromNodeLabelKey: a}", upstreamTemplatesList, "readNodesFrom"},
		{"unknown field", "apiVersion: v1alpha1\nnodegroup: {fromNodeLabelKey: a}", upstreamTemplatesList, "nodegroup"},
		{"bad count", "apiVersion: v1alpha1\nnodegroups: {fromNodeLabelKey: node.kubernetes.io/instance-type}", bad, "max-count"},
		{"no group", "apiVersion: v1alpha1\nnodegroups: {fromNodeLabelKey: missing}", upstreamTemplatesList, "no template node"},
		{"not nodes", "apiVersion: v1alpha1\nnodegroups: {fromNodeLabelKey: a}", "apiVersion: v1\nkind: Pod\n", "Pod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := translateUpstream(context.Background(), upstreamClient("templates", tc.templates), "ns", []byte(tc.cfg))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

// TestInitialSize: a group with no instance starts at its initialSize
// (upstream's desired-count); one that has instances is left as it is.
func TestInitialSize(t *testing.T) {
	cfg, err := ParseConfig([]byte(`
nodeGroups:
- name: g
  maxSize: 5
  initialSize: 2
  template: {capacity: {cpu: "1", memory: 1Gi, pods: "10"}}
`))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewSimpleClientset()
	p, err := New(ctx, cfg, client, "ns", nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := p.groups["g"].TargetSize(ctx); n != 2 {
		t.Errorf("target size %d, want the initial 2", n)
	}
	if _, err := ParseConfig([]byte("nodeGroups:\n- name: g\n  maxSize: 1\n  initialSize: 2\n  template: {capacity: {cpu: '1', memory: 1Gi, pods: '10'}}\n")); err == nil ||
		!strings.Contains(err.Error(), "initialSize") {
		t.Errorf("initialSize above maxSize accepted: %v", err)
	}
}

func TestFilterByDiscovery(t *testing.T) {
	cfg := func() *Config {
		c, err := ParseConfig([]byte(`
nodeGroups:
- {name: a, maxSize: 1, template: {labels: {team: x, tier: web}, capacity: {cpu: "1", memory: 1Gi, pods: "10"}}}
- {name: b, maxSize: 1, template: {labels: {team: "y"}, capacity: {cpu: "1", memory: 1Gi, pods: "10"}}}
- {name: c, maxSize: 1, template: {capacity: {cpu: "1", memory: 1Gi, pods: "10"}}}
`))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	names := func(c *Config) string {
		var n []string
		for _, g := range c.NodeGroups {
			n = append(n, g.Name)
		}
		return strings.Join(n, ",")
	}
	for _, tc := range []struct {
		specs []string
		want  string
		err   string
	}{
		{specs: nil, want: "a,b,c"},
		{specs: []string{"kwok:team=x"}, want: "a"},
		{specs: []string{"kwok:team"}, want: "a,b"},
		{specs: []string{"kwok:team=x,tier=db"}, want: ""},
		{specs: []string{"kwok:team=x", "kwok:team=y"}, want: "a,b"},
		{specs: []string{"asg:tag=k8s.io/cluster-autoscaler/enabled"}, err: "kwok:<label>=<value>"},
		{specs: []string{"kwok:=x"}, err: "empty label key"},
	} {
		c := cfg()
		err := c.FilterByDiscovery(tc.specs)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: err %v, want %q", tc.specs, err, tc.err)
			}
		case err != nil:
			t.Errorf("%v: %v", tc.specs, err)
		case names(c) != tc.want:
			t.Errorf("%v: groups %q, want %q", tc.specs, names(c), tc.want)
		}
	}
}

// Template nodes read from the cluster are often nodes this provider made,
// with the kwok-provider taint already: it is not added a second time
// (the API server refuses a Node with the same taint twice). Found with
// FuzzConfig's Node checks.
func TestUpstreamTemplateWithTheTaintAlready(t *testing.T) {
	n := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "made-by-kwok", Labels: map[string]string{"g": "a"}},
		Spec: apiv1.NodeSpec{Taints: []apiv1.Taint{{Key: UpstreamTaintKey, Value: "true", Effect: apiv1.TaintEffectNoSchedule}}},
		Status: apiv1.NodeStatus{Capacity: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("1"),
			apiv1.ResourceMemory: resource.MustParse("1Gi"), apiv1.ResourcePods: resource.MustParse("10")}}}
	cfg, err := translateUpstream(context.Background(), upstreamClient("templates", "", n), "ns",
		[]byte("apiVersion: v1alpha1\nreadNodesFrom: cluster\nnodegroups: {fromNodeLabelKey: g}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if taints := cfg.NodeGroups[0].Template.Taints; len(taints) != 1 || taints[0].Key != UpstreamTaintKey {
		t.Errorf("taints %v, want kwok-provider once", taints)
	}
}
