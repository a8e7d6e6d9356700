package core

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
	"k8s.io/autoscaler/cluster-autoscaler/processors"
)

// countingRepair is a repair processor that counts its calls and reports
// a change when told to.
type countingRepair struct {
	changed bool
	calls   *int
}

func (r countingRepair) Repair(context.Context, *processors.Loop) bool {
	*r.calls++
	return r.changed
}

// TestStopBeforeScaling: the steps before the scale-up end the loop in
// their order (no ready node, cluster health, repairs), each with its
// result and its reason for the explainer, and a later step does not run
// once an earlier one stopped the loop.
func TestStopBeforeScaling(t *testing.T) {
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name          string
		ready, unread int
		fromZero      bool
		repair        bool
		want          Result
		wantRepairs   int
		wantStopped   string // the explainer's message for the pending pod; "" when the loop went on
	}{
		{name: "no node and no scale-up from zero", want: Result{},
			wantStopped: "the cluster has no ready node and --scale-up-from-zero=false"},
		{name: "unhealthy cluster", ready: 1, unread: 4, fromZero: true, want: Result{},
			wantStopped: "cluster unhealthy (4 unready and 0 long unregistered of 5 registered nodes; " +
				"--ok-total-unready-count=3, --max-total-unready-percentage=45)"},
		{name: "a repair changed the cluster", ready: 2, repair: true, want: Result{Productive: true}, wantRepairs: 1,
			wantStopped: "a repair changed the cluster; the next loop decides"},
		{name: "healthy, nothing repaired: the loop goes on", ready: 2, want: Result{}, wantRepairs: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := fakeprovider.NewProvider()
			p.AddNodeGroup("a", 0, 10, tc.ready+tc.unread, nil)
			nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc,
				cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
			for i := range tc.ready + tc.unread {
				n := stepsTestNode(fmt.Sprintf("n%d", i), i < tc.ready, now)
				p.AddNode("a", n)
				if err := nodes.Add(n); err != nil {
					t.Fatal(err)
				}
			}
			if err := pods.Add(&apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-0"}}); err != nil {
				t.Fatal(err)
			}
			opts := DefaultOptions()
			opts.ScaleUpFromZero = tc.fromZero
			calls := 0
			rec := explain.NewRecorder()
			a := NewAutoscaler(opts, Listers{Nodes: corelisters.NewNodeLister(nodes), Pods: corelisters.NewPodLister(pods)},
				p, metrics.New(prometheus.NewRegistry()), WithPassiveClock(testclock.NewFakePassiveClock(now)),
				WithExplainer(rec),
				WithProcessors(processors.Set{Repairs: []processors.RepairProcessor{countingRepair{tc.repair, &calls}}}))
			res, err := a.RunOnce(context.Background(), now)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, res); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if calls != tc.wantRepairs {
				t.Errorf("repair called %d times, want %d", calls, tc.wantRepairs)
			}
			g, _, ok := rec.Pod("ns/web-0")
			stopped := ok && g.Outcome == explain.OutcomeLoopStopped
			if tc.wantStopped == "" && stopped {
				t.Errorf("loop recorded as stopped (%q), want it to go on", g.Message)
			}
			if tc.wantStopped != "" && (!stopped || g.Message != tc.wantStopped) {
				t.Errorf("record %+v (found %v), want outcome %q with %q", g, ok, explain.OutcomeLoopStopped, tc.wantStopped)
			}
		})
	}
}

func stepsTestNode(name string, ready bool, now time.Time) *apiv1.Node {
	rl := apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("4"), apiv1.ResourcePods: resource.MustParse("110")}
	status := apiv1.ConditionFalse
	if ready {
		status = apiv1.ConditionTrue
	}
	return &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
		Status: apiv1.NodeStatus{Capacity: rl, Allocatable: rl, Conditions: []apiv1.NodeCondition{{Type: apiv1.NodeReady,
			Status: status, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}}}}
}
