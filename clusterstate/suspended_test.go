package clusterstate

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
)

// A node with the condition Suspended=True counts as suspended, whatever
// its Ready condition: in the group's and the cluster's counts and the
// status ConfigMap, not as unready, so that suspended nodes never make a
// group or the cluster unhealthy (upstream's suspended state).
func TestSuspendedNodesCountAsSuspended(t *testing.T) {
	p := fakeprovider.NewProvider()
	p.AddNodeGroup("a", 0, 10, 5, nil)
	nodes := addNodes(p, "a", 1, true, t0.Add(-time.Hour))
	suspended := addNodes(p, "a", 4, false, t0.Add(-time.Hour)) // Ready=False, long past the startup time
	for i, n := range suspended {
		status := apiv1.ConditionTrue
		if i == 3 {
			status = apiv1.ConditionFalse // Suspended=False: an ordinary unready node
		}
		n.Status.Conditions = append(n.Status.Conditions, apiv1.NodeCondition{Type: NodeSuspended, Status: status})
	}
	nodes = append(nodes, suspended...)
	opts := DefaultOptions()
	opts.OkTotalUnreadyCount = 0
	opts.MaxTotalUnreadyPercentage = 30
	r := NewRegistry(opts)
	update(t, r, p, nodes, t0)

	want := NodeCounts{Ready: 1, Unready: 1, Suspended: 3}
	if diff := cmp.Diff(want, r.Group("a").Counts); diff != "" {
		t.Errorf("group counts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, r.ClusterCounts()); diff != "" {
		t.Errorf("cluster counts (-want +got):\n%s", diff)
	}
	if got := r.ClusterCounts().Registered(); got != 5 {
		t.Errorf("registered %d, want 5 (suspended nodes are registered)", got)
	}
	// 1 unready of 5 registered is 20%, within 30%; had the suspended nodes
	// counted as unready (4 of 5), both would be unhealthy.
	if !r.Group("a").Healthy || !r.ClusterHealthy() {
		t.Errorf("healthy: group %t, cluster %t; want both healthy", r.Group("a").Healthy, r.ClusterHealthy())
	}
	got := countsStat(r.ClusterCounts()).Registered
	if diff := cmp.Diff(RegisteredStat{Total: 5, Ready: 1, Suspended: 3, Unready: UnreadyStat{Total: 1}}, got); diff != "" {
		t.Errorf("status counts (-want +got):\n%s", diff)
	}
}
