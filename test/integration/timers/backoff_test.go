package timers

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	clocktesting "k8s.io/utils/clock/testing"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest/inprocess"
)

// TestBackOffLastsItsDefaultFiveMinutes: the preferred group (by the
// priority expander) runs out of capacity after one instance; the loop that
// sees its failed instance backs it off for --initial-node-group-backoff-duration
// (upstream's 5 minutes) and gives the pods to the fallback group. The
// back-off holds at 4m50s and is over at 5m05s.
func TestBackOffLastsItsDefaultFiveMinutes(t *testing.T) {
	e := framework.New(t)
	path, preferred, fallback := itest.OutOfCapacityGroups(e)
	itest.DumpPods(e)
	opts := inprocess.Options(e, path, func(o *config.Options) {
		o.Expanders = []string{"priority"}
		o.EmitPerNodeGroupMetrics = true
	})
	if opts.InitialNodeGroupBackoff != 5*time.Minute {
		t.Fatalf("the default initial back-off is %v, want upstream's 5m", opts.InitialNodeGroupBackoff)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	p := inprocess.Start(e, clk, opts)
	itest.CreatePods(e, "web", 8, "1", map[string]string{"shape": "standard"}) // two 4-CPU nodes
	waitCachedUnschedulable(e, p, 8)
	p.CatchUp()
	p.RunOnce() // two preferred instances asked for; the cloud has one
	e.Eventually(30*time.Second, "the preferred group's failed instance listed", func(ctx context.Context) (bool, error) {
		g := groupNamed(p, preferred)
		if g == nil {
			return false, nil
		}
		instances, err := g.Nodes(ctx)
		for _, in := range instances {
			if in.Status != nil && in.Status.ErrorInfo != nil {
				return true, err
			}
		}
		return false, err
	})
	p.Step(10 * time.Second)
	p.RunOnce() // sees the failure: preferred backed off, fallback scaled up
	backedOff := clk.Now()
	if got := backoff(t, p, preferred); got != 1 {
		t.Fatalf("node_group_backoff_status of %s = %v after its stockout, want 1", preferred, got)
	}
	p.Step(4*time.Minute + 50*time.Second)
	p.RunOnce()
	if got := backoff(t, p, preferred); got != 1 {
		t.Errorf("%s not backed off %v after its stockout, within the 5-minute back-off", preferred, clk.Since(backedOff))
	}
	p.Step(15 * time.Second)
	p.RunOnce()
	if got := backoff(t, p, preferred); got != 0 {
		t.Errorf("%s still backed off %v after its stockout", preferred, clk.Since(backedOff))
	}
	e.Eventually(60*time.Second, "all 8 pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 8)
	})
	if got := itest.NodesPerPool(e); got[preferred] != 1 || got[fallback] < 1 {
		t.Errorf("nodes per group = %v, want 1 in %s (its capacity) and the rest in %s", got, preferred, fallback)
	}
}

// waitCachedUnschedulable waits until the loop's pod informer holds n pods
// of the test's namespace, each marked unschedulable by the scheduler.
func waitCachedUnschedulable(e *framework.Env, p *inprocess.Autoscaler, n int) {
	e.T.Helper()
	e.Eventually(30*time.Second, "the pods unschedulable in the loop's cache", func(context.Context) (bool, error) {
		pods, err := p.Informers.Listers.Pods.Pods(e.Namespace).List(labels.Everything())
		if err != nil || len(pods) != n {
			return false, err
		}
		for _, pod := range pods {
			if !unschedulable(pod) {
				return false, nil
			}
		}
		return true, nil
	})
}

// backoff is node_group_backoff_status of group summed over its reasons
// (0 when the group has no series).
func backoff(t *testing.T, p *inprocess.Autoscaler, group string) float64 {
	t.Helper()
	return p.Sum("cluster_autoscaler_node_group_backoff_status", map[string]string{"node_group": group})
}

// groupNamed is the provider's node group id, nil when it has none.
func groupNamed(p *inprocess.Autoscaler, id string) cloudprovider.NodeGroup {
	groups, err := p.Provider.NodeGroups(context.Background())
	if err != nil {
		return nil
	}
	for _, g := range groups {
		if g.Id() == id {
			return g
		}
	}
	return nil
}
