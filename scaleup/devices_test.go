package scaleup

import (
	"context"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
)

// TestNoSecondScaleUpWhileDevicesStart: the nodes of a GPU scale-up
// register Ready, but their device plugin has not reported the GPUs yet.
// They are not ready for the registry (not started), so the pods they were
// added for still fit their upcoming template copies: no second scale-up.
// Once the GPUs are there the pods fit the nodes themselves.
func TestNoSecondScaleUpWhileDevicesStart(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tmpl := templateNode("gpu", "4")
	tmpl.Labels["fake.gpu/type"] = "t4"
	tmpl.Status.Capacity["nvidia.com/gpu"] = resource.MustParse("1")
	tmpl.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("1")
	provider := fakeprovider.NewProvider()
	provider.AddNodeGroup("gpu", 0, 10, 0, tmpl)
	o := newOrchestrator(t, provider, nil)
	pods := pendingPods(2, "1")
	for _, p := range pods {
		p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
	}
	res, err := runLoop(ctx, o, Input{Now: now, Pending: pods})
	if err != nil {
		t.Fatal(err)
	}
	if got := increases(res)["gpu"]; got != 2 {
		t.Fatalf("first loop: gpu +%d, want +2", got)
	}

	ngs, _ := provider.NodeGroups(ctx)
	instances, _ := ngs[0].Nodes(ctx)
	var nodes []*apiv1.Node
	for i, in := range instances {
		n := tmpl.DeepCopy()
		n.Name, n.Spec.ProviderID = "gpu-"+string(rune('a'+i)), in.Id
		n.CreationTimestamp = metav1.NewTime(now.Add(20 * time.Second))
		n.Status.Conditions = []apiv1.NodeCondition{{Type: apiv1.NodeReady, Status: apiv1.ConditionTrue}}
		delete(n.Status.Allocatable, "nvidia.com/gpu")
		nodes = append(nodes, n)
	}
	res, err = runLoop(ctx, o, Input{Now: now.Add(30 * time.Second), Nodes: nodes, Pending: pods})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Increases) != 0 || res.FitExisting != 2 {
		t.Errorf("while the GPUs start: increases %v, fitExisting %d; want none and 2", increases(res), res.FitExisting)
	}

	for _, n := range nodes {
		n.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("1")
	}
	res, err = runLoop(ctx, o, Input{Now: now.Add(40 * time.Second), Nodes: nodes, Pending: pods})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Increases) != 0 || res.FitExisting != 2 {
		t.Errorf("with the GPUs: increases %v, fitExisting %d; want none and 2", increases(res), res.FitExisting)
	}
}
