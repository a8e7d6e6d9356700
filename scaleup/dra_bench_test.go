package scaleup

import (
	"context"
	"fmt"
	goruntime "runtime"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/scaledown"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/drain"
)

// benchClass is a DeviceClass selecting driver's devices.
func benchClass(name, driver string) *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
			CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "` + driver + `"`}}}}}
}

// benchSlice is node's ResourceSlice of n devices of driver.
func benchSlice(node, driver string, n int) *resourceapi.ResourceSlice {
	sl := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-" + driver},
		Spec: resourceapi.ResourceSliceSpec{Driver: driver, NodeName: &node,
			Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1}}}
	for i := 0; i < n; i++ {
		sl.Spec.Devices = append(sl.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i)})
	}
	return sl
}

// heapMB is the live heap after a collection, in MB.
func heapMB() float64 {
	goruntime.GC()
	var m goruntime.MemStats
	goruntime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / (1 << 20)
}

// BenchmarkDRAScaleUp500Pods3DeviceGroups: one scale-up decision for 500
// pending pods in three Deployments, each pod claiming (from its
// Deployment's ResourceClaimTemplate) one device of the Deployment's class;
// three node groups at zero offer 4, 8 and 8 devices per node, one driver
// (and class) each, in their templates' ResourceSlices. The decision loads
// the snapshot and the DRA objects, estimates each group for each class
// with the DynamicResources plugin (allocating claims in simulation),
// chooses and increases: 50 + 25 + 13 nodes.
func BenchmarkDRAScaleUp500Pods3DeviceGroups(b *testing.B) {
	drivers := []string{"gpu-a.example.com", "gpu-b.example.com", "gpu-c.example.com"}
	perNode := []int{4, 8, 8}
	podsPer := []int{200, 200, 100}
	objs := []runtime.Object{}
	var pending []*apiv1.Pod
	for i, d := range drivers {
		objs = append(objs, benchClass(d, d), &resourceapi.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: d},
			Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
				Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
					DeviceClassName: d, Count: 1, AllocationMode: resourceapi.DeviceAllocationModeExactCount}}}}}}})
		for j, p := range pendingPods(podsPer[i], "1") {
			p.Name = fmt.Sprintf("train-%d-%d", i, j)
			p.UID = k8stypes.UID(p.Name)
			p.OwnerReferences[0].UID = k8stypes.UID(fmt.Sprintf("rs-%d", i))
			tmpl := d
			p.Spec.ResourceClaims = []apiv1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmpl}}
			pending = append(pending, p)
		}
	}
	ctx := context.Background()
	want := map[string]int{"g0": 50, "g1": 25, "g2": 13}
	heap := 0.0
	for b.Loop() {
		b.StopTimer()
		provider := fakeprovider.NewProvider()
		for i, d := range drivers {
			id := fmt.Sprintf("g%d", i)
			provider.AddNodeGroup(id, 0, 100, 0, templateNode(id, "64")).
				SetTemplateResourceSlices([]*resourceapi.ResourceSlice{benchSlice(id, d, perNode[i])})
		}
		o := newDRAOrchestrator(b, provider, objs...)
		o.opts.MaxNodesPerScaleUp = 1000
		b.StartTimer()
		res, err := runLoop(ctx, o, Input{Now: time.Now(), Pending: pending})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if got := increases(res); fmt.Sprint(got) != fmt.Sprint(want) {
			b.Fatalf("increases %v, want %v (remaining %d)", got, want, len(res.Remaining))
		}
		heap = max(heap, heapMB())
		b.StartTimer()
	}
	b.ReportMetric(heap, "heap-MB")
}

// draNodeObjects is node i of the scale-down fixture: 4 devices of
// driver; its pods each hold one device through their own allocated claim
// (made from a template, named in their status).
func draNodeObjects(node, driver string, pods int) ([]runtime.Object, []*apiv1.Pod) {
	objs := []runtime.Object{benchSlice(node, driver, 4)}
	var out []*apiv1.Pod
	yes := true
	for j := 0; j < pods; j++ {
		p := pendingPods(1, "1")[0]
		p.Name, p.Spec.NodeName = fmt.Sprintf("%s-p%d", node, j), node
		p.UID = k8stypes.UID("uid-" + p.Name)
		tmpl, claim := "one-gpu", p.Name+"-gpu"
		p.Spec.ResourceClaims = []apiv1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmpl}}
		p.Status.ResourceClaimStatuses = []apiv1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: &claim}}
		p.Status.Phase = apiv1.PodRunning
		c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: claim,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID, Controller: &yes}}},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu",
				Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", Count: 1,
					AllocationMode: resourceapi.DeviceAllocationModeExactCount}}}}},
			Status: resourceapi.ResourceClaimStatus{
				Allocation: &resourceapi.AllocationResult{
					Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
						Request: "gpu", Driver: driver, Pool: node, Device: fmt.Sprintf("gpu-%d", j)}}},
					NodeSelector: &apiv1.NodeSelector{NodeSelectorTerms: []apiv1.NodeSelectorTerm{{MatchFields: []apiv1.NodeSelectorRequirement{{
						Key: "metadata.name", Operator: apiv1.NodeSelectorOpIn, Values: []string{node}}}}}}},
				ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: p.Name, UID: p.UID}}}}
		objs = append(objs, c)
		out = append(out, p)
	}
	return objs, out
}

// BenchmarkDRAScaleDownLoop800Nodes: scale-down loops (the loop's session:
// snapshot and DRA objects loaded; then the planner: utilisation of every
// node from its devices, the drain simulation of the candidates, claims
// released and re-allocated elsewhere) over 800 nodes of 4 devices each:
// every fourth node is busy (3 pods, each holding one device through its
// claim), the others run one such pod (device utilisation 0.25, under the
// GPU threshold: all 600 are candidates, 30 simulated per loop). One
// planner across the loops, 10 s apart, as in the autoscaler.
func BenchmarkDRAScaleDownLoop800Nodes(b *testing.B) {
	const nodes, driver = 800, removalDriver
	provider := fakeprovider.NewProvider()
	provider.AddNodeGroup("gpu", 0, 1000, nodes, templateNode("gpu", "64"))
	objs := []runtime.Object{benchClass("gpu", driver)}
	var nodeList []*apiv1.Node
	var pods []*apiv1.Pod
	created := metav1.NewTime(time.Now().Add(-time.Hour))
	for i := 0; i < nodes; i++ {
		n := templateNode(fmt.Sprintf("n%d", i), "64")
		n.CreationTimestamp = created
		provider.AddNode("gpu", n)
		nodeList = append(nodeList, n)
		count := 1
		if i%4 == 0 {
			count = 3
		}
		o, p := draNodeObjects(n.Name, driver, count)
		objs, pods = append(objs, o...), append(pods, p...)
	}
	o := newDRAOrchestrator(b, provider, objs...)
	opts := config.Defaults()
	taintClient := fake.NewClientset()
	for _, n := range nodeList {
		if _, err := taintClient.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	planner := scaledown.NewPlanner(scaledown.DefaultOptions(), provider, drain.NewRules(drain.Options{}, drain.Listers{}),
		scaledown.NewTaints(taintClient, opts.MaxBulkSoftTaintCount, false))
	ctx := context.Background()
	now := time.Now()
	heap, unneeded := 0.0, 0
	for b.Loop() {
		now = now.Add(10 * time.Second)
		if err := o.state.Update(ctx, provider, nodeList, now); err != nil {
			b.Fatal(err)
		}
		in := Input{Now: now, Nodes: nodeList, ScheduledPods: pods}
		session := o.Begin(ctx, in)
		plan := planner.Update(ctx, scaledown.Input{Now: now, Nodes: nodeList, ScheduledPods: pods, State: o.state,
			Session: session})
		b.StopTimer()
		unneeded = max(unneeded, len(plan.Unneeded))
		heap = max(heap, heapMB())
		b.StartTimer()
	}
	if unneeded == 0 {
		b.Fatal("no node found unneeded")
	}
	b.ReportMetric(heap, "heap-MB")
	b.ReportMetric(float64(unneeded), "unneeded")
}
