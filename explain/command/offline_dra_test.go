package command

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"k8s.io/autoscaler/cluster-autoscaler/builder"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/core"
	simframework "k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

func deviceSlice(name, node string) *resourceapi.ResourceSlice {
	return &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.ResourceSliceSpec{
		Driver: "gpu.example.com", NodeName: &node, Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1},
		Devices: []resourceapi.Device{{Name: "gpu-0"}, {Name: "gpu-1"}}}}
}

// TestOfflineDumpCarriesDRA: the DRA objects a /snapshotz dump lists from
// the informers (ResourceSlices, ResourceClaims, DeviceClasses,
// ResourceClaimTemplates) and a group's template ResourceSlices come back
// from the dump in explain --snapshot: its client serves resource.k8s.io/v1
// with the same objects, and the group's template carries its slices, so
// that pods with claims are simulated as live.
func TestOfflineDumpCarriesDRA(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	slice := deviceSlice("gpu-1-slice", "gpu-1")
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "claim"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu",
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.example.com"}}}}}}
	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"}}
	tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "one-gpu"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: claim.Spec}}
	live := fake.NewClientset(slice, claim, class, tmpl)
	factory := informers.NewSharedInformerFactory(live, 0)
	list := builder.SnapshotObjects(factory, nil, "kube-system", true)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	objects, err := list()
	if err != nil {
		t.Fatal(err)
	}
	templateNode := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "tmpl-gpu", Labels: map[string]string{"pool": "gpu"}}}
	templateSlices := []*resourceapi.ResourceSlice{deviceSlice("tmpl-gpu-slice", "tmpl-gpu")}
	dump := core.DebuggingSnapshot{StartTimestamp: mustTime(t, "2026-11-27T10:00:00Z"), NodeList: []*core.SnapshotNode{},
		TemplateNodes: map[string]*core.SnapshotNode{"gpu": {Node: templateNode, Pods: []*apiv1.Pod{}, ResourceSlices: templateSlices}},
		SnapshotCloud: core.SnapshotCloud{NodeGroups: []*core.SnapshotNodeGroup{{Id: "gpu", MaxSize: 3, Exist: true,
			Instances: []core.SnapshotInstance{}}}, NodeGroupOfNode: map[string]string{}},
		Objects: objects}
	data, err := json.Marshal(dump)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dump.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}

	src, err := offlineSource(config.Defaults(), path, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	offlineFactory := informers.NewSharedInformerFactory(src.client, 0)
	dra, err := builder.NewDRASource(ctx, src.client, offlineFactory)
	if err != nil || dra == nil {
		t.Fatalf("the offline client does not serve DRA: %v, %v", dra, err)
	}
	offlineFactory.Start(ctx.Done())
	offlineFactory.WaitForCacheSync(ctx.Done())
	names := func(objs []metav1.Object) []string {
		var out []string
		for _, o := range objs {
			out = append(out, o.GetNamespace()+"/"+o.GetName())
		}
		slices.Sort(out)
		return out
	}
	gotSlices, err1 := dra.ResourceSlices()
	gotClaims, err2 := dra.ResourceClaims()
	gotClasses, err3 := dra.DeviceClasses()
	gotTemplate, err4 := dra.ResourceClaimTemplate("ns", "one-gpu")
	for _, err := range []error{err1, err2, err3, err4} {
		if err != nil {
			t.Fatal(err)
		}
	}
	got := [][]string{names(asObjects(gotSlices)), names(asObjects(gotClaims)), names(asObjects(gotClasses))}
	want := [][]string{{"/gpu-1-slice"}, {"ns/claim"}, {"/gpu.example.com"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the dump's DRA objects read offline (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(slice.Spec, gotSlices[0].Spec); diff != "" {
		t.Errorf("the slice read offline (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(tmpl.Spec, gotTemplate.Spec); diff != "" {
		t.Errorf("the claim template read offline (-want +got):\n%s", diff)
	}
	provider, err := src.providers.Build(ctx, src.opts.CloudProvider, cloudprovider.BuildOptions{Options: builder.ProviderOptions(src.opts)})
	if err != nil {
		t.Fatal(err)
	}
	groups, _ := provider.NodeGroups(ctx)
	if len(groups) != 1 {
		t.Fatalf("%d groups, want 1", len(groups))
	}
	ni, err := groups[0].TemplateNodeInfo(ctx)
	if err != nil || ni == nil || len(ni.ResourceSlices) != 1 || cmp.Diff(templateSlices[0].Spec, ni.ResourceSlices[0].Spec) != "" {
		t.Errorf("the group's template offline: %+v, %v; want its ResourceSlice", ni, err)
	}

	// A dump of a cluster that does not serve DRA keeps it off.
	dump.Objects = &core.SnapshotObjects{}
	data, _ = json.Marshal(dump)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	src, err = offlineSource(config.Defaults(), path, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if served, err := simframework.DRAServed(src.client.Discovery()); served || err != nil {
		t.Errorf("DRA served offline for a dump without it: %v, %v", served, err)
	}
}

func asObjects[T metav1.Object](objs []T) []metav1.Object {
	out := make([]metav1.Object, 0, len(objs))
	for _, o := range objs {
		out = append(out, o)
	}
	return out
}
