package core

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	apiv1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	testclock "k8s.io/utils/clock/testing"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
)

// A loop reports suspended nodes under nodes_count{state="suspended"}
// (neither ready nor unready) and skipped_pods_count at 0: nothing here
// skips a pending pod's check.
func TestLoopReportsSuspendedNodesAndNoSkippedPods(t *testing.T) {
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	p := fakeprovider.NewProvider()
	p.AddNodeGroup("a", 0, 10, 3, nil)
	nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for i, name := range []string{"n0", "n1", "suspended"} {
		n := stepsTestNode(name, i < 2, now)
		if name == "suspended" {
			n.Status.Conditions = append(n.Status.Conditions,
				apiv1.NodeCondition{Type: clusterstate.NodeSuspended, Status: apiv1.ConditionTrue})
		}
		p.AddNode("a", n)
		if err := nodes.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	a := NewAutoscaler(DefaultOptions(), Listers{Nodes: corelisters.NewNodeLister(nodes), Pods: corelisters.NewPodLister(pods)},
		p, metrics.New(reg), WithPassiveClock(testclock.NewFakePassiveClock(now)))
	if _, err := a.RunOnce(context.Background(), now); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				switch {
				case mf.GetName() == "cluster_autoscaler_nodes_count" && l.GetName() == "state",
					mf.GetName() == "cluster_autoscaler_skipped_pods_count" && l.GetName() == "requestor":
					got[mf.GetName()+"/"+l.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	want := map[string]float64{
		"cluster_autoscaler_nodes_count/ready": 2, "cluster_autoscaler_nodes_count/unready": 0,
		"cluster_autoscaler_nodes_count/notStarted": 0, "cluster_autoscaler_nodes_count/suspended": 1,
		"cluster_autoscaler_nodes_count/unregistered": 0, "cluster_autoscaler_nodes_count/longUnregistered": 0,
		"cluster_autoscaler_skipped_pods_count/filter-out-pod-list-processor": 0,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("series (-want +got):\n%s", diff)
	}
}
