package offline

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// oldDump is a /snapshotz dump of the format before node groups were
// recorded.
const oldDump = `{"StartTimestamp":"2026-11-27T10:00:00Z","EndTimestamp":"2026-11-27T10:00:01Z",
"NodeList":[{"Node":{"metadata":{"name":"n1"}},"Pods":[]}],"TemplateNodes":{},"PendingPods":[]}`

const dump = `{"StartTimestamp":"2026-11-27T10:00:00Z","EndTimestamp":"2026-11-27T10:00:01Z",
"NodeList":[{"Node":{"metadata":{"name":"n1"},"spec":{"providerID":"p://n1"}},
  "Pods":[{"metadata":{"name":"a","namespace":"x"},"spec":{"nodeName":"n1"}}]}],
"TemplateNodes":{"a":{"Node":{"metadata":{"name":"tmpl-a","labels":{"pool":"a"}}},"Pods":[{"metadata":{"name":"ds"}}]}},
"PendingPods":[{"metadata":{"name":"p","namespace":"x"}}],
"CloudProvider":"kwok",
"NodeGroups":[
  {"Id":"a","MinSize":1,"MaxSize":5,"TargetSize":2,"Exist":true,
   "Instances":[{"Id":"p://n1","State":1},{"Id":"p://gone","State":2,"ErrorClass":1,"ErrorCode":"STOCKOUT"}]},
  {"Id":"b","MinSize":0,"MaxSize":3,"TargetSize":0,"Exist":true,"Instances":[],
   "Errors":{"TemplateNodeInfo":"no image"}}],
"NodeGroupOfNode":{"n1":"a"},
"ResourceLimits":{"Min":{},"Max":{"cpu":64}},
"NodePrices":{"a":0.5},"PodPrices":{"Base":0.1,"PerCore":1,"PerGiB":0.5}}`

func TestLoadRefusesAnOldDump(t *testing.T) {
	_, _, err := Load(strings.NewReader(oldDump))
	if !errors.Is(err, ErrIncomplete) || !strings.Contains(err.Error(), "NodeGroups") ||
		!strings.Contains(err.Error(), "NodeGroupOfNode") {
		t.Errorf("Load(old dump) = %v, want ErrIncomplete naming NodeGroups and NodeGroupOfNode", err)
	}
	for name, in := range map[string]string{"not JSON": "{", "null node": `{"StartTimestamp":"2026-11-27T10:00:00Z",
		"NodeGroups":[],"NodeGroupOfNode":{},"NodeList":[null]}`} {
		if _, _, err := Load(strings.NewReader(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestProviderAnswersFromTheDump(t *testing.T) {
	ctx := context.Background()
	snap, notes, err := Load(strings.NewReader(dump))
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "no Objects") {
		t.Errorf("notes %q, want one about the missing objects", notes)
	}
	if got := len(Objects(snap)); got != 3 {
		t.Errorf("%d objects, want the node and two pods", got)
	}
	p := NewProvider(snap)
	groups, _ := p.NodeGroups(ctx)
	type group struct {
		Id                   string
		Min, Max, Target     int
		Instances            []cloudprovider.Instance
		Template, TemplateOK bool
	}
	var got []group
	for _, g := range groups {
		size, _ := g.TargetSize(ctx)
		in, _ := g.Nodes(ctx)
		ni, err := g.TemplateNodeInfo(ctx)
		got = append(got, group{g.Id(), g.MinSize(), g.MaxSize(), size, in, ni != nil && len(ni.Pods) == 1, err == nil})
	}
	want := []group{
		{"a", 1, 5, 2, []cloudprovider.Instance{{Id: "p://n1", Status: &cloudprovider.InstanceStatus{State: cloudprovider.InstanceRunning}},
			{Id: "p://gone", Status: &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating,
				ErrorInfo: &cloudprovider.InstanceErrorInfo{ErrorClass: cloudprovider.OutOfResourcesErrorClass, ErrorCode: "STOCKOUT"}}}},
			true, true},
		{"b", 0, 3, 0, []cloudprovider.Instance{}, false, false},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("node groups (-want +got):\n%s", diff)
	}
	for _, n := range []*apiv1.Node{snap.NodeList[0].Node, {ObjectMeta: metav1.ObjectMeta{Name: "p://gone"}, Spec: apiv1.NodeSpec{ProviderID: "p://gone"}}} {
		if g, _ := p.NodeGroupForNode(ctx, n); g == nil || g.Id() != "a" {
			t.Errorf("group of %s: %v, want a", n.Name, g)
		}
	}
	if g, _ := p.NodeGroupForNode(ctx, &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "other"}}); g != nil {
		t.Errorf("group of an unknown node: %s, want none", g.Id())
	}
	if err := groups[0].IncreaseSize(ctx, 1); !errors.Is(err, ErrOffline) {
		t.Errorf("IncreaseSize = %v, want ErrOffline", err)
	}
	if err := groups[0].DeleteNodes(ctx, nil); !errors.Is(err, ErrOffline) {
		t.Errorf("DeleteNodes = %v, want ErrOffline", err)
	}
	if l, _ := p.GetResourceLimiter(ctx); l.GetMax("cpu") != 64 || l.HasMaxLimitSet("memory") {
		t.Errorf("limits %v, want cpu max 64 only", l)
	}
	pricing, err := p.Pricing(ctx)
	if err != nil {
		t.Fatal(err)
	}
	copyOfTemplate := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "tmpl-a-1", Labels: map[string]string{"pool": "a"}}}
	start := snap.StartTimestamp
	if price, err := pricing.NodePrice(ctx, copyOfTemplate, start, start.Add(2*time.Hour)); err != nil || price != 1 {
		t.Errorf("price of two hours of a's template: %v, %v; want 1", price, err)
	}
	pod := &apiv1.Pod{Spec: apiv1.PodSpec{Containers: []apiv1.Container{{Name: "c", Resources: apiv1.ResourceRequirements{
		Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("2"), apiv1.ResourceMemory: resource.MustParse("4Gi")}}}}}}
	if price, err := pricing.PodPrice(ctx, pod, start, start.Add(time.Hour)); err != nil || math.Abs(price-4.1) > 1e-9 {
		t.Errorf("price of an hour of a pod of 2 cores and 4Gi: %v, %v; want 0.1 + 2 + 2", price, err)
	}
	snap.GPUConfigs = map[string]*cloudprovider.GpuConfig{"n1": nil, "tmpl-a": {Label: "gpu", Type: "t4"}}
	gpuNode := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: map[string]string{"gpu": "t4"}}}
	if p.GetNodeGpuConfig(ctx, snap.NodeList[0].Node) != nil || p.GetNodeGpuConfig(ctx, gpuNode) == nil {
		t.Errorf("GPU configs: a null entry must mean none, a copy of a GPU template must have one")
	}
	snap.NodePrices = nil
	if _, err := NewProvider(snap).Pricing(ctx); !errors.Is(err, cloudprovider.ErrNotImplemented) {
		t.Errorf("Pricing of a dump without prices = %v, want ErrNotImplemented", err)
	}
}

// TestLoadNotesMissingDRA: a dump without DRA objects whose pending pods
// have resource claims says that they fit no node offline; with the DRA
// objects it does not.
func TestLoadNotesMissingDRA(t *testing.T) {
	withClaims := strings.Replace(dump, `"PendingPods":[{"metadata":{"name":"p","namespace":"x"}}]`,
		`"PendingPods":[{"metadata":{"name":"p","namespace":"x"},"spec":{"resourceClaims":[{"name":"gpu","resourceClaimTemplateName":"t"}]}}]`, 1)
	for _, tc := range []struct {
		name, dump string
		want       bool
	}{
		{"no DRA", withClaims, true},
		{"DRA", strings.Replace(withClaims, `"CloudProvider"`, `"Objects":{"DRA":true,"DaemonSets":[]},"CloudProvider"`, 1), false},
		{"no claims", dump, false},
	} {
		_, notes, err := Load(strings.NewReader(tc.dump))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := strings.Contains(strings.Join(notes, "\n"), "no DRA objects")
		if got != tc.want {
			t.Errorf("%s: notes %q, want a note on DRA: %v", tc.name, notes, tc.want)
		}
	}
}
