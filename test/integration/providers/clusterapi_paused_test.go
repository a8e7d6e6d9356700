package providers

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"k8s.io/autoscaler/cluster-autoscaler/test/capi"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// TestClusterAPIPausedMachineDeploymentKeepsItsNodes: two MachineDeployments
// of two empty nodes each, one then paused with cluster.x-k8s.io/paused on
// real Cluster API controllers. The autoscaler scales the other down to
// zero, and leaves the paused one out: it is no node group, its Machines
// are never marked and its replicas stay.
func TestClusterAPIPausedMachineDeploymentKeepsItsNodes(t *testing.T) {
	e := framework.New(t)
	itest.DumpPods(e)
	dyn := itest.StartCAPI(e)
	paused, control := framework.UniqueName("paused"), framework.UniqueName("control")
	for _, md := range []string{paused, control} {
		itest.CreateMD(e, dyn, md, capi.Machine{CPU: "4", Memory: "16Gi"}, 2, itest.CAPISizes(0, 4), nil)
	}
	e.Eventually(90*time.Second, "two nodes of each MachineDeployment", func(ctx context.Context) (bool, error) {
		a, err := itest.PoolNodes(ctx, e, paused)
		if err != nil {
			return false, err
		}
		b, err := itest.PoolNodes(ctx, e, control)
		return len(a) == 2 && len(b) == 2, err
	})
	// Paused only now: Cluster API does not reconcile a paused object, so it
	// would not have created the Machines.
	patch := []byte(`{"metadata":{"annotations":{"cluster.x-k8s.io/paused":""}}}`)
	if _, err := dyn.Resource(capi.GVR("machinedeployments")).Namespace(e.Namespace).Patch(e.Context(), paused,
		types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	before, err := itest.MachinesOf(e.Context(), e, dyn, paused)
	if err != nil {
		t.Fatal(err)
	}

	p := itest.StartAutoscaler(t, "autoscaler", itest.CAPIArgs(e, "--scale-down-unneeded-time=3s",
		"--scale-down-delay-after-add=0s", "--scale-down-unready-time=3s")...)
	e.Eventually(120*time.Second, "the control MachineDeployment at 0 and its nodes gone", func(ctx context.Context) (bool, error) {
		nodes, err := itest.PoolNodes(ctx, e, control)
		return err == nil && len(nodes) == 0 && itest.MDReplicas(e, dyn, control) == 0, err
	})
	if got := itest.MDReplicas(e, dyn, paused); got != 2 {
		t.Errorf("replicas of the paused MachineDeployment = %d, want 2", got)
	}
	after, err := itest.MachinesOf(e.Context(), e, dyn, paused)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Errorf("the paused MachineDeployment has %d Machines, had %d", len(after), len(before))
	}
	for name, m := range after {
		if before[name] == nil {
			t.Errorf("Machine %s of the paused MachineDeployment is new", name)
		}
		if _, marked := m.GetAnnotations()[capi.DeleteMachineAnnotation]; marked {
			t.Errorf("Machine %s of the paused MachineDeployment was marked for deletion", name)
		}
	}
	if nodes, err := itest.PoolNodes(e.Context(), e, paused); err != nil || len(nodes) != 2 {
		t.Errorf("nodes of the paused MachineDeployment = %v (%v), want 2", nodes, err)
	}
	if !p.Log.Contains(`"Discovered a paused node group; leaving it out"`) || !p.Log.Contains(e.Namespace+"/"+paused) {
		t.Error("the paused MachineDeployment is not logged as left out")
	}
}
