package kwok

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

// migGroup offers one GPU cut MIG-like: 7 compute slices and 40Gi shared
// by the whole GPU and its 1g and 3g partitions.
const migGroup = `
nodeGroups:
- name: mig
  maxSize: 4
  template:
    capacity: {cpu: "8", memory: 32Gi, pods: "110"}
    devices:
    - driver: gpu.example.com
      sharedCounters:
      - name: gpu-0
        counters: {slices: {value: "7"}, memory: {value: 40Gi}}
      devices:
      - name: gpu-0
        attributes: {profile: {string: whole}}
        consumesCounters:
        - counterSet: gpu-0
          counters: {slices: {value: "7"}, memory: {value: 40Gi}}
      - name: gpu-0-1g-0
        attributes: {profile: {string: 1g.5gb}}
        consumesCounters:
        - counterSet: gpu-0
          counters: {slices: {value: "1"}, memory: {value: 5Gi}}
      - name: gpu-0-3g-0
        attributes: {profile: {string: 3g.20gb}}
        consumesCounters:
        - counterSet: gpu-0
          counters: {slices: {value: "3"}, memory: {value: 20Gi}}
`

func TestTemplateCarriesSharedCountersInTheirOwnSlice(t *testing.T) {
	_, g := newTestProvider(t, fake.NewClientset(), migGroup)
	info, err := g.TemplateNodeInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	node := info.Node.Name
	if len(info.ResourceSlices) != 2 {
		t.Fatalf("template slices: %d, want 2 (counters, devices)", len(info.ResourceSlices))
	}
	pool := resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 2}
	wantCounters := resourceapi.ResourceSliceSpec{Driver: "gpu.example.com", NodeName: &node, Pool: pool,
		SharedCounters: []resourceapi.CounterSet{{Name: "gpu-0", Counters: map[string]resourceapi.Counter{
			"slices": {Value: resource.MustParse("7")}, "memory": {Value: resource.MustParse("40Gi")}}}}}
	if diff := cmp.Diff(wantCounters, info.ResourceSlices[0].Spec); diff != "" {
		t.Errorf("counters slice (-want +got):\n%s", diff)
	}
	devices := info.ResourceSlices[1].Spec
	if devices.Pool != pool || len(devices.SharedCounters) != 0 || len(devices.Devices) != 3 {
		t.Fatalf("devices slice: pool %+v, %d counter sets, %d devices", devices.Pool, len(devices.SharedCounters), len(devices.Devices))
	}
	want1g := []resourceapi.DeviceCounterConsumption{{CounterSet: "gpu-0", Counters: map[string]resourceapi.Counter{
		"slices": {Value: resource.MustParse("1")}, "memory": {Value: resource.MustParse("5Gi")}}}}
	if diff := cmp.Diff(want1g, devices.Devices[1].ConsumesCounters); diff != "" {
		t.Errorf("the 1g device's consumption (-want +got):\n%s", diff)
	}
	if info.ResourceSlices[0].Name == info.ResourceSlices[1].Name {
		t.Errorf("both slices are named %s", info.ResourceSlices[0].Name)
	}
}

func TestCreatedNodePublishesCountersAndDevicesOwnedByIt(t *testing.T) {
	_, g := newTestProvider(t, fake.NewClientset(), migGroup)
	n := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "mig-abc", UID: types.UID("u1")}}
	slices := g.resourceSlices(n)
	if len(slices) != 2 {
		t.Fatalf("%d slices, want 2", len(slices))
	}
	for _, sl := range slices {
		if len(sl.OwnerReferences) != 1 || sl.OwnerReferences[0].UID != "u1" || *sl.Spec.NodeName != "mig-abc" ||
			sl.Spec.Pool.Name != "mig-abc" || sl.Labels[NodeGroupAnnotation] != "mig" {
			t.Errorf("slice %s: owners %v, node %s, pool %s, labels %v", sl.Name, sl.OwnerReferences, *sl.Spec.NodeName,
				sl.Spec.Pool.Name, sl.Labels)
		}
	}
}

func TestCounterConfigErrors(t *testing.T) {
	group := func(devices string) string {
		return "nodeGroups: [{name: a, maxSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1}, devices: [" + devices + "]}}]"
	}
	const set = "sharedCounters: [{name: gpu-0, counters: {slices: {value: '7'}}}]"
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown counter set", group("{driver: gpu.example.com, " + set + ", devices: [{name: g0, consumesCounters: [{counterSet: gpu-1, counters: {slices: {value: '1'}}}]}]}"),
			"devices[0].devices[0].consumesCounters[0].counterSet: Not found: \"gpu-1 (not among driver gpu.example.com's sharedCounters)\""},
		{"no counter sets at all", group("{driver: gpu.example.com, devices: [{name: g0, consumesCounters: [{counterSet: gpu-0, counters: {slices: {value: '1'}}}]}]}"),
			"consumesCounters[0].counterSet: Not found"},
		{"unknown counter", group("{driver: gpu.example.com, " + set + ", devices: [{name: g0, consumesCounters: [{counterSet: gpu-0, counters: {memory: {value: 5Gi}}}]}]}"),
			"counter set gpu-0 has no such counter"},
		{"negative shared counter", group("{driver: gpu.example.com, sharedCounters: [{name: gpu-0, counters: {slices: {value: '-7'}}}], devices: [{name: g0}]}"),
			"sharedCounters[0].counters[slices]: Invalid value: \"-7\": must not be negative"},
		{"negative consumption", group("{driver: gpu.example.com, " + set + ", devices: [{name: g0, consumesCounters: [{counterSet: gpu-0, counters: {slices: {value: '-1'}}}]}]}"),
			"consumesCounters[0].counters[slices]: Invalid value: \"-1\": must not be negative"},
		{"more than the set holds", group("{driver: gpu.example.com, " + set + ", devices: [{name: g0, consumesCounters: [{counterSet: gpu-0, counters: {slices: {value: '8'}}}]}]}"),
			"more than counter set gpu-0 holds (7)"},
		{"duplicate counter set", group("{driver: gpu.example.com, sharedCounters: [{name: gpu-0, counters: {s: {value: '1'}}}, {name: gpu-0, counters: {s: {value: '1'}}}], devices: [{name: g0}]}"),
			"sharedCounters[1].name: Duplicate"},
		{"bad counter set name", group("{driver: gpu.example.com, sharedCounters: [{name: GPU_0, counters: {s: {value: '1'}}}], devices: [{name: g0}]}"),
			"sharedCounters[0].name"},
		{"empty counter set", group("{driver: gpu.example.com, sharedCounters: [{name: gpu-0}], devices: [{name: g0}]}"),
			"sharedCounters[0].counters"},
		{"set consumed twice by one device", group("{driver: gpu.example.com, " + set + ", devices: [{name: g0, consumesCounters: [{counterSet: gpu-0, counters: {slices: {value: '1'}}}, {counterSet: gpu-0, counters: {slices: {value: '1'}}}]}]}"),
			"consumesCounters[1].counterSet: Duplicate"},
		{"unknown counter field", group("{driver: gpu.example.com, sharedCounters: [{name: gpu-0, counters: {s: {value: '1', max: '2'}}}], devices: [{name: g0}]}"),
			"unknown field"},
	} {
		_, err := ParseConfig([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one mentioning %q", tc.name, err, tc.want)
		}
	}
	if _, err := ParseConfig([]byte(migGroup)); err != nil {
		t.Errorf("the MIG-like group: %v", err)
	}
}

func TestTooManyCounterConsumersForOneSlice(t *testing.T) {
	d := DriverDevices{Driver: "gpu.example.com", SharedCounters: []resourceapi.CounterSet{{Name: "gpu-0",
		Counters: map[string]resourceapi.Counter{"slices": {Value: resource.MustParse("100")}}}}}
	for i := 0; i < resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures+1; i++ {
		d.Devices = append(d.Devices, resourceapi.Device{Name: "g" + strings.Repeat("x", i%5) + string(rune('a'+i%26)) + string(rune('a'+i/26)),
			ConsumesCounters: []resourceapi.DeviceCounterConsumption{{CounterSet: "gpu-0",
				Counters: map[string]resourceapi.Counter{"slices": {Value: resource.MustParse("1")}}}}})
	}
	errs := validateDevices([]DriverDevices{d}, nil)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "want between 1 and 64 devices") {
		t.Errorf("65 devices consuming counters: %v; want the one error of the 64-device limit", errs)
	}
}
