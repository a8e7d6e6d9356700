package healing

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/taints"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest/inprocess"
)

// TestConsolidationTakesScaleDownsUnneededNode: with scale-down on at its
// default unneeded time (10m) and --consolidation-enabled, a node at 25%
// utilisation is scale-down's unneeded node; consolidation takes it within
// a few loops instead of leaving it to scale-down's timer. Scale-down's
// simulation used to keep its removals in the loop's session, so the
// planner saw its unneeded nodes gone (NotInSimulation) and the benchmark
// stalled for the whole unneeded time (docs/benchmarks.md). While it is in
// the plan the node carries the consolidation-candidate taint.
func TestConsolidationTakesScaleDownsUnneededNode(t *testing.T) {
	e := framework.New(t)
	itest.DumpPods(e)
	pool, path := smallPool(e, "handover", 3)
	opts := inprocess.Options(e, path, func(o *config.Options) {
		o.ScaleDownEnabled = true
		o.NodeGroupDefaults.ScaleDownUnneededTime = 10 * time.Minute // upstream's default
		o.ScaleDownDelayAfterAdd = 0                                 // scale-down simulates in every loop
		o.UnremovableNodeRecheckTimeout = 0                          // and the node again once uncordoned
		o.Disruption.ConsolidationEnabled = true
		// Consolidation leaves the new node alone for 3 minutes: by then
		// scale-down counts it unneeded, and the hand-over is what is tested.
		o.DisruptionSettleTime = 3 * time.Minute
	})
	clk := clocktesting.NewFakeClock(time.Now())
	p := inprocess.Start(e, clk, opts)
	loop := func() {
		p.Step(5 * time.Second)
		p.CatchUp()
		p.RunOnce()
	}
	running := func(ctx context.Context, app string) (map[string]int, error) {
		list, err := e.Client.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return nil, err
		}
		out := map[string]int{}
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == apiv1.PodRunning {
				out[p.Spec.NodeName]++
			}
		}
		return out, nil
	}

	keeper(e, pool)
	var kept string
	e.Eventually(90*time.Second, "the keeper Running on a node of its own", func(ctx context.Context) (bool, error) {
		loop()
		list, err := poolNodeList(ctx, e, pool)
		if err != nil || len(list) != 1 {
			return false, err
		}
		kept = list[0].Name
		on, err := running(ctx, "keeper")
		return on[kept] == 1, err
	})
	// Cordoned, the keeper's node makes the web pod scale up a node of its
	// own: one pod of 1 CPU on a 4-CPU node, under scale-down's threshold.
	setUnschedulable(e, kept, true)
	itest.Deployment(e, "web", 1, map[string]string{"pool": pool})
	var spare string
	e.Eventually(120*time.Second, "the web pod Running on a second node", func(ctx context.Context) (bool, error) {
		loop()
		list, err := poolNodeList(ctx, e, pool)
		if err != nil || len(list) != 2 {
			return false, err
		}
		for _, n := range list {
			if n.Name != kept {
				spare = n.Name
			}
		}
		on, err := running(ctx, "web")
		return on[spare] == 1, err
	})
	setUnschedulable(e, kept, false)
	start := clk.Now()
	marked := false
	e.Eventually(180*time.Second, "node "+spare+" consolidated away", func(ctx context.Context) (bool, error) {
		loop()
		if clk.Since(start) >= opts.NodeGroupDefaults.ScaleDownUnneededTime {
			return false, fmt.Errorf("node %s still there after the unneeded time: left to scale-down", spare)
		}
		n, err := e.Client.CoreV1().Nodes().Get(ctx, spare, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		for _, t := range n.Spec.Taints {
			marked = marked || t.Key == taints.ConsolidationCandidate
		}
		return false, nil
	})
	t.Logf("consolidated %v (fake clock) after the cordon was lifted", clk.Since(start))
	if !marked {
		t.Error("the node never carried the consolidation-candidate taint while it was in the plan")
	}
	e.Eventually(60*time.Second, "the web pod Running beside the keeper", func(ctx context.Context) (bool, error) {
		on, err := running(ctx, "web")
		return on[kept] == 1, err
	})
	ev, err := itest.NodeEvents(e.Context(), e, spare)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ev["DisruptionStarted"], "consolidatable") {
		t.Errorf("events of %s: %v, want DisruptionStarted for consolidatable", spare, ev)
	}
	if n, err := e.Client.CoreV1().Nodes().Get(e.Context(), kept, metav1.GetOptions{}); err == nil {
		for _, t2 := range n.Spec.Taints {
			if t2.Key == taints.ConsolidationCandidate {
				t.Errorf("the node that stays, %s, still carries the consolidation-candidate taint", kept)
			}
		}
	}
}
