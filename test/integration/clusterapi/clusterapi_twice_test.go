package clusterapi

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"k8s.io/autoscaler/cluster-autoscaler/cleanup"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/clusterapi"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/test/capi"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

type cleanupCounts struct{ deleted map[string]int }

func (c *cleanupCounts) RegisterDeletedNodes(reason string, n int) { c.deleted[reason] += n }
func (c *cleanupCounts) RegisterOldUnregisteredNodesRemoved(int)   {}
func (c *cleanupCounts) UpdateUnregisteredBreaker(bool)            {}

// TestClusterAPIFailedMachineDeletedTwiceGoesOnce: a MachineDeployment of
// one Machine whose creation failed and two healthy ones, on real Cluster
// API controllers. Its MachineSet is paused, so Cluster API does not act on
// the autoscaler's writes for a while (as a slow MachineSet controller).
// Meanwhile the cleanup runs two loops, each seeing the failed Machine
// still there, and then its node is deleted once more through the
// provider (as scale-down, healing or a rollback would). The replicas drop
// by one, once; when the MachineSet is unpaused, Cluster API deletes the
// failed Machine and no other.
func TestClusterAPIFailedMachineDeletedTwiceGoesOnce(t *testing.T) {
	e := framework.New(t)
	itest.DumpPods(e)
	dyn := itest.StartCAPI(e)
	md := framework.UniqueName("twice")
	ctx := e.Context()
	// First one Machine whose creation fails; then the template heals and
	// two more Machines get Nodes (the MachineDeployment's spec is not
	// changed, so there is no rollout).
	itest.CreateMD(e, dyn, md, capi.Machine{CPU: "4", Memory: "16Gi", FailReason: "CreateError"}, 1, itest.CAPISizes(0, 5), nil)
	opt, err := clusterapi.WithAutoDiscovery([]string{"clusterapi:namespace=" + e.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	p := clusterapi.New(dyn, capi.Group, capi.Version, opt)
	var failedID string
	e.Eventually(90*time.Second, "the first Machine failed", func(ctx context.Context) (bool, error) {
		failedID = failedInstance(ctx, p)
		return failedID != "", nil
	})
	patch := []byte(`{"spec":{"template":{"spec":{"failReason":null}}}}`)
	if _, err := dyn.Resource(capi.TestGVR(capi.InfraGroup, "TestMachineTemplate")).Namespace(e.Namespace).Patch(ctx, md,
		types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	patchMD(t, e, dyn, md, `{"spec":{"replicas":3}}`)
	e.Eventually(90*time.Second, "two nodes of the MachineDeployment", func(ctx context.Context) (bool, error) {
		nodes, err := itest.PoolNodes(ctx, e, md)
		return len(nodes) == 2, err
	})
	before, err := itest.MachinesOf(ctx, e, dyn, md)
	if err != nil || len(before) != 3 {
		t.Fatalf("Machines %v (%v), want 3", len(before), err)
	}
	failedName, ok := strings.CutPrefix(failedID, clusterapi.PlaceholderPrefix+e.Namespace+"/")
	if !ok || before[failedName] == nil {
		t.Fatalf("failed instance %s is none of the Machines %v", failedID, before)
	}
	ms := pauseMachineSet(t, e, dyn, md, true)

	state := clusterstate.NewRegistry(clusterstate.DefaultOptions())
	counts := &cleanupCounts{deleted: map[string]int{}}
	c := cleanup.New(cleanup.Options{MaxDeletionsPerLoop: 20, BreakerRatio: 0.5, BreakerMinimum: 2}, p, counts)
	for loop := 1; loop <= 2; loop++ {
		if err := p.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		nodes, err := e.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: capi.PoolLabel + "=" + md})
		if err != nil {
			t.Fatal(err)
		}
		var ns []*apiv1.Node
		for i := range nodes.Items {
			ns = append(ns, &nodes.Items[i])
		}
		now := time.Now()
		if err := state.Update(ctx, p, ns, now); err != nil {
			t.Fatal(err)
		}
		res := c.Run(ctx, state, now)
		if want := map[int]int{1: 1, 2: 0}[loop]; res.Deleted != want {
			t.Errorf("cleanup loop %d deleted %d instances, want %d", loop, res.Deleted, want)
		}
		if got := itest.MDReplicas(e, dyn, md); got != 2 {
			t.Errorf("replicas = %d after cleanup loop %d, want 2", got, loop)
		}
	}
	// Asked for once more through the provider, as another part of the
	// autoscaler would; the Machine carries no deletion timestamp yet.
	m, err := dyn.Resource(capi.GVR("machines")).Namespace(e.Namespace).Get(ctx, failedName, metav1.GetOptions{})
	if err != nil || m.GetDeletionTimestamp() != nil {
		t.Fatalf("failed Machine %s: %v, deletion timestamp %v: want it there and not deleting yet", failedName, err, m.GetDeletionTimestamp())
	}
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	victim := cloudprovider.InstanceNode(failedID)
	g, err := p.NodeGroupForNode(ctx, victim)
	if err != nil || g == nil {
		t.Fatalf("node group of %s: %v, %v", failedID, g, err)
	}
	if err := g.DeleteNodes(ctx, []*apiv1.Node{victim}); err != nil {
		t.Fatal(err)
	}
	if got := itest.MDReplicas(e, dyn, md); got != 2 {
		t.Errorf("replicas = %d after the node was deleted again, want 2", got)
	}
	t.Logf("MachineSet %s unpaused", ms)
	pauseMachineSet(t, e, dyn, md, false)
	e.Eventually(90*time.Second, "the failed Machine gone", func(ctx context.Context) (bool, error) {
		machines, err := itest.MachinesOf(ctx, e, dyn, md)
		return err == nil && machines[failedName] == nil, err
	})
	// Cluster API would delete a second Machine in the same pass, so it
	// would be going by now; watch a little longer all the same.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		machines, err := itest.MachinesOf(ctx, e, dyn, md)
		if err != nil {
			t.Fatal(err)
		}
		for name := range before {
			if name == failedName {
				continue
			}
			if machines[name] == nil || machines[name].GetDeletionTimestamp() != nil {
				t.Fatalf("healthy Machine %s was deleted too", name)
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	if got := itest.MDReplicas(e, dyn, md); got != 2 {
		t.Errorf("replicas = %d, want 2", got)
	}
	if counts.deleted[cleanup.ReasonFailedCreation] != 1 {
		t.Errorf("failed creations deleted (metric) = %d, want 1", counts.deleted[cleanup.ReasonFailedCreation])
	}
}

// failedInstance is the id of an instance of the only node group whose
// creation failed, or "".
func failedInstance(ctx context.Context, p *clusterapi.Provider) string {
	if err := p.Refresh(ctx); err != nil {
		return ""
	}
	groups, _ := p.NodeGroups(ctx)
	if len(groups) != 1 {
		return ""
	}
	ins, _ := groups[0].Nodes(ctx)
	for _, in := range ins {
		if in.Status != nil && in.Status.ErrorInfo != nil {
			return in.Id
		}
	}
	return ""
}

func patchMD(t *testing.T, e *framework.Env, dyn dynamic.Interface, md, patch string) {
	t.Helper()
	if _, err := dyn.Resource(capi.GVR("machinedeployments")).Namespace(e.Namespace).Patch(e.Context(), md,
		types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// pauseMachineSet sets or removes cluster.x-k8s.io/paused on the one
// MachineSet of md and returns its name.
func pauseMachineSet(t *testing.T, e *framework.Env, dyn dynamic.Interface, md string, on bool) string {
	t.Helper()
	list, err := dyn.Resource(capi.GVR("machinesets")).Namespace(e.Namespace).List(e.Context(),
		metav1.ListOptions{LabelSelector: capi.DeploymentNameLabel + "=" + md})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("MachineSets of %s: %d (%v), want 1", md, len(list.Items), err)
	}
	value := `""`
	if !on {
		value = "null"
	}
	name := list.Items[0].GetName()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"cluster.x-k8s.io/paused":%s}}}`, value)
	if _, err := dyn.Resource(capi.GVR("machinesets")).Namespace(e.Namespace).Patch(e.Context(), name,
		types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}
