package clusterapi

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/config"
)

const testVersion = "v1beta2"

// obj is a fluent builder of Cluster API objects.
type obj struct{ u *unstructured.Unstructured }

func makeObj(kind, ns, name string) *obj {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetAPIVersion(DefaultGroup + "/" + testVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return &obj{u: u}
}

func (o *obj) sizes(minS, maxS string) *obj {
	return o.ann(MinSizeAnnotation, minS).ann(MaxSizeAnnotation, maxS)
}

func (o *obj) ann(k, v string) *obj {
	a := o.u.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[k] = v
	o.u.SetAnnotations(a)
	return o
}

func (o *obj) label(k, v string) *obj {
	l := o.u.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[k] = v
	o.u.SetLabels(l)
	return o
}

func (o *obj) replicas(n int64) *obj {
	_ = unstructured.SetNestedField(o.u.Object, n, "spec", "replicas")
	return o
}

func (o *obj) set(v any, path ...string) *obj {
	_ = unstructured.SetNestedField(o.u.Object, v, path...)
	return o
}

func (o *obj) owner(kind, name string) *obj {
	o.u.SetOwnerReferences(append(o.u.GetOwnerReferences(), metav1.OwnerReference{
		APIVersion: DefaultGroup + "/" + testVersion, Kind: kind, Name: name, UID: types.UID("uid-" + name)}))
	return o
}

// machine is a Running Machine of MachineSet set with a provider ID and a node.
func machine(ns, name, set, providerID, node string) *obj {
	o := makeObj("Machine", ns, name).owner(kindMachineSet, set).set("Running", "status", "phase")
	if providerID != "" {
		o.set(providerID, "spec", "providerID")
	}
	if node != "" {
		o.set(node, "status", "nodeRef", "name")
	}
	return o
}

func newFake(t *testing.T, objs ...*obj) (*dynamicfake.FakeDynamicClient, []runtime.Object) {
	t.Helper()
	lists := map[schema.GroupVersionResource]string{}
	for kind, res := range resourceOf {
		lists[schema.GroupVersionResource{Group: DefaultGroup, Version: testVersion, Resource: res}] = kind + "List"
	}
	var ro []runtime.Object
	for _, o := range objs {
		ro = append(ro, o.u)
	}
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), lists, ro...), ro
}

func newProvider(t *testing.T, specs []string, objs ...*obj) (*Provider, *dynamicfake.FakeDynamicClient) {
	t.Helper()
	client, _ := newFake(t, objs...)
	d, err := WithAutoDiscovery(specs)
	if err != nil {
		t.Fatal(err)
	}
	p := New(client, DefaultGroup, testVersion, d, WithClock(clocktesting.NewFakePassiveClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))))
	if err := p.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	return p, client
}

func groupIDs(t *testing.T, p *Provider) []string {
	t.Helper()
	gs, err := p.NodeGroups(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, g := range gs {
		ids = append(ids, g.Id())
	}
	return ids
}

func TestNodeGroupDiscovery(t *testing.T) {
	objs := []*obj{
		makeObj(kindMachineDeployment, "ns", "md-ok").sizes("1", "5").replicas(2).set("c1", "spec", "clusterName"),
		makeObj(kindMachineDeployment, "ns", "md-plain").replicas(2),
		makeObj(kindMachineDeployment, "ns", "md-nan").sizes("one", "5"),
		makeObj(kindMachineDeployment, "ns", "md-neg").sizes("-1", "5"),
		makeObj(kindMachineDeployment, "ns", "md-inverted").sizes("6", "5"),
		makeObj(kindMachineDeployment, "ns", "md-halfway").ann(MinSizeAnnotation, "1"),
		makeObj(kindMachineSet, "ns", "md-ok-abc").sizes("0", "3").owner(kindMachineDeployment, "md-ok"),
		makeObj(kindMachineSet, "ns", "ms-alone").sizes("0", "3").replicas(1).label("pool", "blue"),
		makeObj(kindMachinePool, "other", "mp").sizes("0", "4").replicas(0).label(ClusterNameLabel, "c2"),
	}
	tests := []struct {
		name  string
		specs []string
		want  []string
	}{
		{"all", nil, []string{"MachineDeployment/ns/md-ok", "MachinePool/other/mp", "MachineSet/ns/ms-alone"}},
		{"namespace", []string{"clusterapi:namespace=other"}, []string{"MachinePool/other/mp"}},
		{"cluster name from spec", []string{"clusterapi:clusterName=c1"}, []string{"MachineDeployment/ns/md-ok"}},
		{"cluster name from label", []string{"clusterapi:clusterName=c2"}, []string{"MachinePool/other/mp"}},
		{"label", []string{"clusterapi:namespace=ns,pool=blue"}, []string{"MachineSet/ns/ms-alone"}},
		{"two specs", []string{"clusterapi:pool=blue", "clusterapi:clusterName=c1"},
			[]string{"MachineDeployment/ns/md-ok", "MachineSet/ns/ms-alone"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := newProvider(t, tc.specs, objs...)
			if diff := cmp.Diff(tc.want, groupIDs(t, p)); diff != "" {
				t.Errorf("groups (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseDiscoverySpecsErrors(t *testing.T) {
	for _, s := range []string{"asg:tag=x", "clusterapi:namespace", "clusterapi:=v", "clusterapi:k="} {
		if _, err := parseDiscoverySpecs([]string{s}); err == nil {
			t.Errorf("%q: no error", s)
		}
	}
}

func TestParseSizes(t *testing.T) {
	tests := []struct {
		name       string
		minS, maxS string
		wantMin    int
		wantMax    int
		wantErr    string
	}{
		{"ok", "0", "10", 0, 10, ""},
		{"spaces", " 2 ", "2", 2, 2, ""},
		{"not a number", "x", "10", 0, 0, "not an integer"},
		{"negative max", "0", "-3", 0, 0, "negative"},
		{"min above max", "4", "3", 0, 0, "above max size"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gotMin, gotMax, err := parseSizes(makeObj(kindMachineDeployment, "ns", "x").sizes(tc.minS, tc.maxS).u)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || gotMin != tc.wantMin || gotMax != tc.wantMax {
				t.Errorf("got %d, %d, %v; want %d, %d", gotMin, gotMax, err, tc.wantMin, tc.wantMax)
			}
		})
	}
}

func getReplicas(t *testing.T, c *dynamicfake.FakeDynamicClient, kind, ns, name string) int64 {
	t.Helper()
	gvr := schema.GroupVersionResource{Group: DefaultGroup, Version: testVersion, Resource: resourceOf[kind]}
	u, err := c.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	return n
}

func onlyGroup(t *testing.T, p *Provider) cloudprovider.NodeGroup {
	t.Helper()
	gs, _ := p.NodeGroups(context.Background())
	if len(gs) != 1 {
		t.Fatalf("%d groups, want 1", len(gs))
	}
	return gs[0]
}

func TestScaling(t *testing.T) {
	ctx := context.Background()
	p, c := newProvider(t, nil,
		makeObj(kindMachineDeployment, "ns", "md").sizes("1", "5").replicas(2),
		makeObj(kindMachineSet, "ns", "md-1").owner(kindMachineDeployment, "md"),
		machine("ns", "m1", "md-1", "aws:///i-1", "n1"),
	)
	g := onlyGroup(t, p)
	if err := g.IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if got := getReplicas(t, c, kindMachineDeployment, "ns", "md"); got != 4 {
		t.Errorf("replicas = %d after +2, want 4", got)
	}
	if n, _ := g.TargetSize(ctx); n != 4 {
		t.Errorf("TargetSize = %d, want 4", n)
	}
	if err := g.IncreaseSize(ctx, 2); err == nil {
		t.Error("increase above max size accepted")
	}
	if err := g.DecreaseTargetSize(ctx, -2); err != nil {
		t.Fatal(err)
	}
	if got := getReplicas(t, c, kindMachineDeployment, "ns", "md"); got != 2 {
		t.Errorf("replicas = %d after -2, want 2", got)
	}
	if err := g.DecreaseTargetSize(ctx, -2); err == nil {
		t.Error("decrease below the existing Machine accepted")
	}
	// Someone else changed replicas: the test operation fails, nothing is written.
	gvr := p.gvr(kindMachineDeployment)
	u, _ := c.Resource(gvr).Namespace("ns").Get(ctx, "md", metav1.GetOptions{})
	_ = unstructured.SetNestedField(u.Object, int64(3), "spec", "replicas")
	if _, err := c.Resource(gvr).Namespace("ns").Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := g.IncreaseSize(ctx, 1); err == nil || !cloudprovider.IsTransient(err) {
		t.Errorf("increase over a stale size: err = %v, want a transient error", err)
	}
	if got := getReplicas(t, c, kindMachineDeployment, "ns", "md"); got != 3 {
		t.Errorf("replicas = %d, want the other writer's 3", got)
	}
}

func machineAnnotations(t *testing.T, c *dynamicfake.FakeDynamicClient, ns, name string) map[string]string {
	t.Helper()
	gvr := schema.GroupVersionResource{Group: DefaultGroup, Version: testVersion, Resource: "machines"}
	u, err := c.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u.GetAnnotations()
}

func node(name, providerID string) *apiv1.Node {
	n := &apiv1.Node{}
	n.Name, n.Spec.ProviderID = name, providerID
	return n
}

func TestDeleteNodes(t *testing.T) {
	ctx := context.Background()
	objs := []*obj{
		makeObj(kindMachineDeployment, "ns", "md").sizes("1", "5").replicas(3),
		makeObj(kindMachineSet, "ns", "md-1").owner(kindMachineDeployment, "md"),
		machine("ns", "m1", "md-1", "aws:///i-1", "n1"),
		machine("ns", "m2", "md-1", "aws:///i-2", "n2"),
		machine("ns", "m3", "md-1", "", "n3"),
		makeObj(kindMachineSet, "ns", "other").sizes("0", "5").replicas(1),
		machine("ns", "o1", "other", "aws:///i-9", "n9"),
	}
	tests := []struct {
		name         string
		nodes        []*apiv1.Node
		wantErr      string
		wantMarked   []string
		wantReplicas int64
	}{
		{"by provider ID", []*apiv1.Node{node("n2", "aws:///i-2")}, "", []string{"m2"}, 2},
		{"by nodeRef", []*apiv1.Node{node("n3", "")}, "", []string{"m3"}, 2},
		{"unregistered placeholder", []*apiv1.Node{cloudprovider.InstanceNode("clusterapi://ns/m3")}, "", []string{"m3"}, 2},
		{"two", []*apiv1.Node{node("n1", "aws:///i-1"), node("n2", "aws:///i-2")}, "", []string{"m1", "m2"}, 1},
		{"below min", []*apiv1.Node{node("n1", "aws:///i-1"), node("n2", "aws:///i-2"), node("n3", "")}, "below min size", nil, 3},
		{"foreign node", []*apiv1.Node{node("n1", "aws:///i-1"), node("n9", "aws:///i-9")}, "no Machine in this group", nil, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, c := newProvider(t, nil, objs...)
			g, err := p.NodeGroupForNode(ctx, node("n1", "aws:///i-1"))
			if err != nil || g == nil || g.Id() != "MachineDeployment/ns/md" {
				t.Fatalf("NodeGroupForNode = %v, %v", g, err)
			}
			err = g.DeleteNodes(ctx, tc.nodes)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			var marked []string
			for _, m := range []string{"m1", "m2", "m3", "o1"} {
				if v, ok := machineAnnotations(t, c, "ns", m)[DeleteMachineAnnotation]; ok {
					marked = append(marked, m)
					if v != "2026-01-02T03:04:05Z" {
						t.Errorf("annotation value %q", v)
					}
				}
			}
			if diff := cmp.Diff(tc.wantMarked, marked); diff != "" {
				t.Errorf("marked machines (-want +got):\n%s", diff)
			}
			if got := getReplicas(t, c, kindMachineDeployment, "ns", "md"); got != tc.wantReplicas {
				t.Errorf("replicas = %d, want %d", got, tc.wantReplicas)
			}
		})
	}
}

func TestNodesAndPhases(t *testing.T) {
	failed := machine("ns", "mf", "ms", "aws:///f", "").set("Failed", "status", "phase").
		set("InsufficientCapacity", "status", "deprecated", "v1beta1", "failureReason").
		set("no m5 left", "status", "deprecated", "v1beta1", "failureMessage")
	deleting := machine("ns", "md", "ms", "aws:///d", "")
	deleting.u.SetDeletionTimestamp(&metav1.Time{Time: time.Unix(1, 0)})
	p, _ := newProvider(t, nil,
		makeObj(kindMachineSet, "ns", "ms").sizes("0", "9").replicas(7),
		machine("ns", "mr", "ms", "aws:///r", "").set("Running", "status", "phase"),
		machine("ns", "mp", "ms", "aws:///p", "").set("Provisioning", "status", "phase"),
		machine("ns", "mpd", "ms", "aws:///pd", "").set("Provisioned", "status", "phase"),
		machine("ns", "mnone", "ms", "", "").set("Pending", "status", "phase"),
		machine("ns", "mdel", "ms", "aws:///del", "").set("Deleting", "status", "phase"),
		failed, deleting,
		// Cluster API v1beta2: the phase stays Provisioning, the failure is
		// in status.deprecated.v1beta1; InsufficientResources is a stock-out.
		machine("ns", "mq", "ms", "", "").set("Provisioning", "status", "phase").
			set("InsufficientResources", "status", "deprecated", "v1beta1", "failureReason").
			set("quota exceeded", "status", "deprecated", "v1beta1", "failureMessage"),
		machine("ns", "mc", "ms", "aws:///c", "").set("Provisioned", "status", "phase").
			set("CreateError", "status", "failureReason"),
	)
	ins, err := onlyGroup(t, p).Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]cloudprovider.InstanceStatus{}
	for _, in := range ins {
		got[in.Id] = *in.Status
	}
	creating := cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating}
	want := map[string]cloudprovider.InstanceStatus{
		"aws:///r":              {State: cloudprovider.InstanceRunning},
		"aws:///p":              creating,
		"aws:///pd":             creating,
		"clusterapi://ns/mnone": creating,
		"aws:///del":            {State: cloudprovider.InstanceDeleting},
		"aws:///d":              {State: cloudprovider.InstanceDeleting},
		"aws:///f": {State: cloudprovider.InstanceCreating, ErrorInfo: &cloudprovider.InstanceErrorInfo{
			ErrorClass: cloudprovider.OtherErrorClass, ErrorCode: "InsufficientCapacity", ErrorMessage: "no m5 left"}},
		"clusterapi://ns/mq": {State: cloudprovider.InstanceCreating, ErrorInfo: &cloudprovider.InstanceErrorInfo{
			ErrorClass: cloudprovider.OutOfResourcesErrorClass, ErrorCode: "InsufficientResources", ErrorMessage: "quota exceeded"}},
		"aws:///c": {State: cloudprovider.InstanceCreating, ErrorInfo: &cloudprovider.InstanceErrorInfo{
			ErrorClass: cloudprovider.OtherErrorClass, ErrorCode: "CreateError", ErrorMessage: "Machine ns/mc failed to be created"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("instances (-want +got):\n%s", diff)
	}
}

func TestMachinePoolInstances(t *testing.T) {
	p, _ := newProvider(t, nil, makeObj(kindMachinePool, "ns", "mp").sizes("0", "3").replicas(2).
		set([]any{"aws:///a", "aws:///b"}, "spec", "providerIDList"))
	g := onlyGroup(t, p)
	ins, _ := g.Nodes(context.Background())
	if len(ins) != 2 || ins[0].Id != "aws:///a" || ins[0].Status.State != cloudprovider.InstanceRunning {
		t.Errorf("instances = %+v", ins)
	}
	if err := g.DeleteNodes(context.Background(), []*apiv1.Node{node("a", "aws:///a")}); !errors.Is(err, cloudprovider.ErrNotImplemented) {
		t.Errorf("deleting a MachinePool instance without a Machine: err = %v, want ErrNotImplemented", err)
	}
}

func TestNodeGroupForNodeAndHasInstance(t *testing.T) {
	ctx := context.Background()
	p, _ := newProvider(t, nil,
		makeObj(kindMachineSet, "ns", "ms").sizes("0", "3").replicas(2),
		machine("ns", "m1", "ms", "aws:///i-1", "n1"),
		machine("ns", "m2", "ms", "", "n2"),
		machine("ns", "free", "unmanaged", "aws:///i-3", "n3"),
	)
	tests := []struct {
		name      string
		node      *apiv1.Node
		wantGroup string
		wantHas   bool
		wantErr   error
	}{
		{"provider ID", node("n1", "aws:///i-1"), "MachineSet/ns/ms", true, nil},
		{"nodeRef", node("n2", "aws:///late"), "MachineSet/ns/ms", true, nil},
		{"placeholder", cloudprovider.InstanceNode("clusterapi://ns/m2"), "MachineSet/ns/ms", true, nil},
		{"machine of no group", node("n3", "aws:///i-3"), "", true, nil},
		{"machine gone", func() *apiv1.Node {
			n := node("n4", "aws:///i-4")
			n.Annotations = map[string]string{NodeMachineAnnotation: "gone"}
			return n
		}(), "", false, nil},
		{"unknown", node("n5", "gce://x"), "", false, cloudprovider.ErrNotImplemented},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := p.NodeGroupForNode(ctx, tc.node)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if g != nil {
				got = g.Id()
			}
			if got != tc.wantGroup {
				t.Errorf("NodeGroupForNode = %q, want %q", got, tc.wantGroup)
			}
			has, err := p.HasInstance(ctx, tc.node)
			if !errors.Is(err, tc.wantErr) || (err == nil && has != tc.wantHas) {
				t.Errorf("HasInstance = %v, %v; want %v, %v", has, err, tc.wantHas, tc.wantErr)
			}
		})
	}
}

func TestGetOptions(t *testing.T) {
	defaults := config.NodeGroupAutoscalingOptions{ScaleDownUtilizationThreshold: 0.5, ScaleDownUnneededTime: 10 * time.Minute}
	tests := []struct {
		name string
		ann  map[string]string
		want *config.NodeGroupAutoscalingOptions
	}{
		{"none", nil, nil},
		{"overrides", map[string]string{
			optionPrefix + "scaledownutilizationthreshold": "0.3",
			optionPrefix + "scaledownunneededtime":         "2m",
			optionPrefix + "maxnodeprovisiontime":          "20m",
		}, &config.NodeGroupAutoscalingOptions{ScaleDownUtilizationThreshold: 0.3, ScaleDownUnneededTime: 2 * time.Minute,
			MaxNodeProvisionTime: 20 * time.Minute}},
		{"invalid values keep defaults", map[string]string{
			optionPrefix + "scaledownutilizationthreshold": "2",
			optionPrefix + "scaledownunneededtime":         "soon",
		}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := makeObj(kindMachineSet, "ns", "ms").sizes("0", "3")
			for k, v := range tc.ann {
				o.ann(k, v)
			}
			p, _ := newProvider(t, nil, o)
			got, err := onlyGroup(t, p).GetOptions(context.Background(), defaults)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

type fakeGroups struct{ groups *metav1.APIGroupList }

func (f fakeGroups) ServerGroups() (*metav1.APIGroupList, error) { return f.groups, nil }

func TestPreferredVersion(t *testing.T) {
	list := &metav1.APIGroupList{Groups: []metav1.APIGroup{
		{Name: "apps", PreferredVersion: metav1.GroupVersionForDiscovery{Version: "v1"}},
		{Name: DefaultGroup, PreferredVersion: metav1.GroupVersionForDiscovery{Version: "v1beta2"},
			Versions: []metav1.GroupVersionForDiscovery{{Version: "v1beta2"}, {Version: "v1beta1"}}},
	}}
	if v, err := preferredVersion(fakeGroups{list}, DefaultGroup); err != nil || v != "v1beta2" {
		t.Errorf("preferredVersion = %q, %v", v, err)
	}
	if _, err := preferredVersion(fakeGroups{list}, "cluster.example.com"); err == nil || !strings.Contains(err.Error(), GroupEnv) {
		t.Errorf("missing group: err = %v", err)
	}
}

func TestDeleteNodesUnmarksWhenScalingFails(t *testing.T) {
	ctx := context.Background()
	p, c := newProvider(t, nil,
		makeObj(kindMachineSet, "ns", "ms").sizes("0", "3").replicas(2),
		machine("ns", "m1", "ms", "aws:///i-1", "n1"),
		machine("ns", "m2", "ms", "aws:///i-2", "n2"),
	)
	g := onlyGroup(t, p)
	// Another writer changes the replicas after the Refresh.
	gvr := p.gvr(kindMachineSet)
	u, _ := c.Resource(gvr).Namespace("ns").Get(ctx, "ms", metav1.GetOptions{})
	_ = unstructured.SetNestedField(u.Object, int64(3), "spec", "replicas")
	if _, err := c.Resource(gvr).Namespace("ns").Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := g.DeleteNodes(ctx, []*apiv1.Node{node("n1", "aws:///i-1")}); !cloudprovider.IsTransient(err) {
		t.Fatalf("err = %v, want a transient error", err)
	}
	if _, marked := machineAnnotations(t, c, "ns", "m1")[DeleteMachineAnnotation]; marked {
		t.Error("m1 still marked after the failed scale-down")
	}
	if got := getReplicas(t, c, kindMachineSet, "ns", "ms"); got != 3 {
		t.Errorf("replicas = %d, want 3", got)
	}
}

// A Scale of 0 replicas carries no spec.replicas: scaling from it works.
func TestIncreaseFromAbsentReplicas(t *testing.T) {
	p, c := newProvider(t, nil, makeObj(kindMachineSet, "ns", "ms").sizes("0", "3"))
	if err := onlyGroup(t, p).IncreaseSize(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if got := getReplicas(t, c, kindMachineSet, "ns", "ms"); got != 1 {
		t.Errorf("replicas = %d, want 1", got)
	}
}

// After Watch, Refresh reads the informers' caches.
func TestRefreshFromInformers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client, _ := newFake(t, makeObj(kindMachineDeployment, "ns", "md").sizes("0", "3").replicas(1))
	p := New(client, DefaultGroup, testVersion)
	if err := p.Watch(ctx, true); err != nil {
		t.Fatal(err)
	}
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"MachineDeployment/ns/md"}, groupIDs(t, p)); diff != "" {
		t.Errorf("groups (-want +got):\n%s", diff)
	}
	if _, err := client.Resource(p.gvr(kindMachineSet)).Namespace("ns").Create(ctx,
		makeObj(kindMachineSet, "ns", "ms").sizes("0", "2").u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(groupIDs(t, p)) != 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		if err := p.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]string{"MachineDeployment/ns/md", "MachineSet/ns/ms"}, groupIDs(t, p)); diff != "" {
		t.Errorf("groups after a create (-want +got):\n%s", diff)
	}
}

// TestScaleRetriesConflictsOfOtherWrites: a conflict whose fresh read still
// shows the replicas the loop saw (Cluster API's controllers writing the
// object's status) is written again; conflicts that never end are a
// transient error, with nothing written.
func TestScaleRetriesConflictsOfOtherWrites(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		conflicts int
		want      int64
		wantErr   bool
	}{
		{name: "two conflicts", conflicts: 2, want: 3},
		{name: "endless conflicts", conflicts: 100, want: 2, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, c := newProvider(t, nil, makeObj(kindMachineDeployment, "ns", "md").sizes("1", "5").replicas(2))
			left := tc.conflicts
			c.PrependReactor("update", "machinedeployments", func(a clienttesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() != "scale" || left == 0 {
					return false, nil, nil
				}
				left--
				return true, nil, apierrors.NewConflict(schema.GroupResource{Group: DefaultGroup, Resource: "machinedeployments"}, "md",
					errors.New("the object has been modified"))
			})
			err := onlyGroup(t, p).IncreaseSize(ctx, 1)
			if tc.wantErr != (err != nil) || (err != nil && !cloudprovider.IsTransient(err)) {
				t.Fatalf("err = %v, want error %v (transient)", err, tc.wantErr)
			}
			if got := getReplicas(t, c, kindMachineDeployment, "ns", "md"); got != tc.want {
				t.Errorf("replicas = %d, want %d", got, tc.want)
			}
		})
	}
}
