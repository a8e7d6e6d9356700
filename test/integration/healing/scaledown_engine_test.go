package healing

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest/inprocess"
)

func decisions(p *inprocess.Autoscaler, reason, action string) float64 {
	return p.Sum("cluster_autoscaler_disruption_decisions_total", map[string]string{"reason": reason, "action": action})
}

func getNode(t *testing.T, e *framework.Env, name string) *apiv1.Node {
	t.Helper()
	n, err := e.Client.CoreV1().Nodes().Get(e.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// storedScaleDown is the scale-down removals the engine's state ConfigMap
// records: node to phase.
func storedScaleDown(ctx context.Context, e *framework.Env) (map[string]string, error) {
	cm, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Get(ctx, disruption.StateConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	var st struct {
		ScaleDown map[string]struct {
			Phase string `json:"phase"`
			For   string `json:"for"`
		} `json:"scaleDown"`
	}
	if err := json.Unmarshal([]byte(cm.Data["state"]), &st); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for n, r := range st.ScaleDown {
		out[n] = r.For + "/" + r.Phase
	}
	return out, nil
}

// TestScaleDownRemovalsOnTheEngine: with the disruption engine on (node
// healing here), scale-down's removal of an empty node is the engine's
// delete-only case: it is admitted, in InFlight and in the state ConfigMap
// with its phase. A leader change mid-removal (the process stopped after the
// ToBeDeleted taint, a new one started on the same state) ends it: the
// start-up clean-up lifts the taint, as upstream's does, and the new
// engine counts the removal cancelled and writes it off; scale-down then
// removes the node again after its unneeded time, and the engine counts it
// completed. Scale-down's own metric is unchanged.
func TestScaleDownRemovalsOnTheEngine(t *testing.T) {
	e := framework.New(t)
	pool, path := smallPool(e, "sdengine", 3)
	opts := inprocess.Options(e, path, func(o *config.Options) {
		o.NodeHealingEnabled = true // the engine on; nothing here needs healing
	})
	clk := clocktesting.NewFakeClock(time.Now())
	p := inprocess.Start(e, clk, opts)
	if p.Loop.Disruption == nil {
		t.Fatal("no disruption engine with --node-healing-enabled")
	}
	loop := func(p *inprocess.Autoscaler) {
		p.CatchUp()
		p.RunOnce()
	}
	itest.Deployment(e, "web", 1, map[string]string{"pool": pool})
	var node string
	e.Eventually(90*time.Second, "a node for the web pod", func(ctx context.Context) (bool, error) {
		loop(p)
		list, err := poolNodeList(ctx, e, pool)
		if err != nil || len(list) != 1 {
			return false, err
		}
		node = list[0].Name
		return true, nil
	})
	if err := e.Client.AppsV1().Deployments(e.Namespace).Delete(e.Context(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "node "+node+" empty in the loop's cache", func(ctx context.Context) (bool, error) {
		pods, err := e.Client.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		return err == nil && len(pods.Items) == 0, err
	})
	// The node is unneeded for --scale-down-unneeded-time, then removed:
	// tainted, then held for --node-delete-delay-after-taint on the fake
	// clock, which the test does not step.
	e.Eventually(60*time.Second, "scale-down of "+node+" admitted by the engine", func(ctx context.Context) (bool, error) {
		loop(p)
		p.Step(11 * time.Minute)
		loop(p)
		return p.Loop.Disruption.InFlight()[node] == disruption.Empty, nil
	})
	e.Eventually(30*time.Second, "the removal of "+node+" in the state ConfigMap", func(ctx context.Context) (bool, error) {
		loop(p)
		stored, err := storedScaleDown(ctx, e)
		return stored[node] == "empty/Draining", err
	})
	if got := decisions(p, "empty", "started"); got != 1 {
		t.Errorf("disruption_decisions_total{empty,started} = %v, want 1", got)
	}

	// A leader change: this process goes (its removal cut short, the taint
	// left), a new one starts on the same cluster and state.
	p.Stop()
	if !itest.HasTaintKey(getNode(t, e, node), disruption.ScaleDownTaint) {
		t.Fatal("the stopped process's removal left no ToBeDeleted taint: the hand-over exercises nothing")
	}
	clk2 := clocktesting.NewFakeClock(time.Now())
	p2 := inprocess.Start(e, clk2, opts)
	e.Eventually(30*time.Second, "the new engine writing the old removal off", func(ctx context.Context) (bool, error) {
		loop(p2)
		stored, err := storedScaleDown(ctx, e)
		return err == nil && len(stored) == 0 && decisions(p2, "empty", "cancelled") == 1, err
	})
	if n := getNode(t, e, node); itest.HasTaintKey(n, disruption.ScaleDownTaint) || n.Spec.Unschedulable {
		t.Errorf("node %s kept the old removal's taint or cordon: %v", node, n.Spec.Taints)
	}
	events, err := itest.NodeEvents(e.Context(), e, node)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(events["DisruptionCancelled"], "previous leader") {
		t.Errorf("no DisruptionCancelled event on %s for the old removal: %v", node, events)
	}

	// Scale-down takes the node again after its unneeded time.
	e.Eventually(60*time.Second, "scale-down of "+node+" admitted again", func(ctx context.Context) (bool, error) {
		loop(p2)
		p2.Step(11 * time.Minute)
		loop(p2)
		return p2.Loop.Disruption.InFlight()[node] == disruption.Empty, nil
	})
	p2.StepUntil(90*time.Second, "node "+node+" deleted", func(ctx context.Context) (bool, error) {
		_, err := e.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	e.Eventually(30*time.Second, "the removal off the record, counted completed", func(ctx context.Context) (bool, error) {
		loop(p2)
		stored, err := storedScaleDown(ctx, e)
		return err == nil && len(stored) == 0 && decisions(p2, "empty", "completed") == 1, err
	})
	if got := p2.Sum("cluster_autoscaler_scaled_down_nodes_total", map[string]string{"reason": "empty"}); got != 1 {
		t.Errorf("cluster_autoscaler_scaled_down_nodes_total{reason=empty} = %v, want 1", got)
	}
}
