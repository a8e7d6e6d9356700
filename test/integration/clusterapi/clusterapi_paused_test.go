package clusterapi

import (
	"context"
	"strings"
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
	if !p.Log.Written(`"Discovered a paused node group; leaving it out"`) || !p.Log.Written(e.Namespace+"/"+paused) {
		t.Error("the paused MachineDeployment is not logged as left out")
	}
}

// TestClusterAPIRollingOutMachineDeploymentKeepsItsNodes: a MachineDeployment
// of two empty nodes is switched to an infrastructure template whose
// machines fail, so Cluster API's rollout stays stuck with the old
// MachineSet at two replicas. The autoscaler keeps its nodes (reason
// NodeGroupScaleDownBlocked in the status ConfigMap, naming the old
// MachineSet), refuses to delete even the failed Machine while the rollout
// lasts, and meanwhile scales another empty MachineDeployment to zero.
func TestClusterAPIRollingOutMachineDeploymentKeepsItsNodes(t *testing.T) {
	e := framework.New(t)
	itest.DumpPods(e)
	dyn := itest.StartCAPI(e)
	rolling, control := framework.UniqueName("rolling"), framework.UniqueName("control")
	for _, md := range []string{rolling, control} {
		itest.CreateMD(e, dyn, md, capi.Machine{CPU: "4", Memory: "16Gi"}, 2, itest.CAPISizes(0, 4), nil)
	}
	var old map[string]bool
	e.Eventually(90*time.Second, "two nodes of each MachineDeployment", func(ctx context.Context) (bool, error) {
		var err error
		old, err = itest.PoolNodes(ctx, e, rolling)
		if err != nil {
			return false, err
		}
		b, err := itest.PoolNodes(ctx, e, control)
		return len(old) == 2 && len(b) == 2, err
	})
	broken := rolling + "-broken"
	if err := capi.CreateMachineTemplate(e.Context(), dyn, e.Namespace, broken,
		capi.Machine{CPU: "4", Memory: "16Gi", FailReason: "InsufficientResources"}, nil); err != nil {
		t.Fatal(err)
	}
	patch := []byte(`{"spec":{"template":{"spec":{"infrastructureRef":{"name":"` + broken + `"}}}}}`)
	if _, err := dyn.Resource(capi.GVR("machinedeployments")).Namespace(e.Namespace).Patch(e.Context(), rolling,
		types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "a second MachineSet (revision 2) of the rolling MachineDeployment", func(ctx context.Context) (bool, error) {
		list, err := dyn.Resource(capi.GVR("machinesets")).Namespace(e.Namespace).List(ctx,
			metav1.ListOptions{LabelSelector: capi.DeploymentNameLabel + "=" + rolling})
		if err != nil {
			return false, err
		}
		for _, ms := range list.Items {
			if ms.GetAnnotations()["machinedeployment.clusters.x-k8s.io/revision"] == "2" {
				return true, nil
			}
		}
		return false, nil
	})

	p := itest.StartAutoscaler(t, "autoscaler", itest.CAPIArgs(e, "--scale-down-unneeded-time=3s",
		"--scale-down-delay-after-add=0s", "--max-node-provision-time=20s")...)
	e.Eventually(120*time.Second, "the control MachineDeployment at 0 and the old nodes kept as NodeGroupScaleDownBlocked",
		func(ctx context.Context) (bool, error) {
			nodes, err := itest.PoolNodes(ctx, e, control)
			if err != nil || len(nodes) != 0 || itest.MDReplicas(e, dyn, control) != 0 {
				return false, err
			}
			kept, err := itest.UnremovableNodes(ctx, e)
			if err != nil {
				return false, err
			}
			for n := range old {
				if kept[n].Reason != "NodeGroupScaleDownBlocked" || !strings.Contains(kept[n].Detail, "of an older revision") {
					return false, nil
				}
			}
			return true, nil
		})
	if got := itest.MDReplicas(e, dyn, rolling); got != 2 {
		t.Errorf("replicas of the rolling MachineDeployment = %d, want 2", got)
	}
	machines, err := itest.MachinesOf(e.Context(), e, dyn, rolling)
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range machines {
		if _, marked := m.GetAnnotations()[capi.DeleteMachineAnnotation]; marked {
			t.Errorf("Machine %s of the rolling MachineDeployment was marked for deletion", name)
		}
	}
	if nodes, err := itest.PoolNodes(e.Context(), e, rolling); err != nil || len(nodes) != 2 {
		t.Errorf("nodes of the rolling MachineDeployment = %v (%v), want its 2 old ones", nodes, err)
	}
	e.Eventually(60*time.Second, "the failed Machine's deletion refused", func(context.Context) (bool, error) {
		return p.Log.Contains(`"Refusing to delete nodes of a paused or rolling out Cluster API node group"`), nil
	})
}
