package core

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	testclock "k8s.io/utils/clock/testing"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/explain"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
)

// TestExplainerRecordsPodsOfAStoppedLoop: in a loop that stops before its
// scale-up because the cluster is unhealthy, the pending pods are recorded
// with why, the unready count and the thresholds, not left to a 404.
func TestExplainerRecordsPodsOfAStoppedLoop(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	p := fakeprovider.NewProvider()
	p.AddNodeGroup("a", 0, 10, 5, nil)
	nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	rl := apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("4"), apiv1.ResourcePods: resource.MustParse("110")}
	for i := range 5 {
		ready := apiv1.ConditionFalse
		if i == 0 {
			ready = apiv1.ConditionTrue
		}
		n := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i),
			CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
			Status: apiv1.NodeStatus{Capacity: rl, Allocatable: rl, Conditions: []apiv1.NodeCondition{{Type: apiv1.NodeReady,
				Status: ready, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}}}}
		p.AddNode("a", n)
		if err := nodes.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	if err := pods.Add(&apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-0"}}); err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.ScaleUpFromZero = true
	rec := explain.NewRecorder()
	a := NewAutoscaler(opts, Listers{Nodes: corelisters.NewNodeLister(nodes), Pods: corelisters.NewPodLister(pods)}, p,
		metrics.New(prometheus.NewRegistry()), WithPassiveClock(testclock.NewFakePassiveClock(now)), WithExplainer(rec))
	if _, err := a.RunOnce(ctx, now); err != nil {
		t.Fatal(err)
	}
	g, _, ok := rec.Pod("ns/web-0")
	want := "cluster unhealthy (4 unready and 0 long unregistered of 5 registered nodes; " +
		"--ok-total-unready-count=3, --max-total-unready-percentage=45)"
	if !ok || g.Outcome != explain.OutcomeLoopStopped || g.Message != want {
		t.Errorf("record %+v (found %v), want outcome %q with %q", g, ok, explain.OutcomeLoopStopped, want)
	}
}
