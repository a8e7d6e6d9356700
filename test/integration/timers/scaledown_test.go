package timers

import (
	"context"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	clocktesting "k8s.io/utils/clock/testing"

	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/scaledown"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest/inprocess"
)

// TestUnneededTimeAtItsDefaultSurvivesARestart: an empty node is removed
// --scale-down-unneeded-time (upstream's 10 minutes) after it was first
// found unneeded, not before, and a restart 8 minutes in does not start the
// count again: the time is on the node (its DeletionCandidate taint).
func TestUnneededTimeAtItsDefaultSurvivesARestart(t *testing.T) {
	e := framework.New(t)
	group := framework.UniqueName("unneeded")
	path := itest.GroupsConfig(e, group)
	node := group + "-n"
	itest.GroupNode(e, group, node, nil)
	opts := inprocess.Options(e, path, nil)
	if opts.NodeGroupDefaults.ScaleDownUnneededTime != 10*time.Minute {
		t.Fatalf("the default unneeded time is %v, want upstream's 10m", opts.NodeGroupDefaults.ScaleDownUnneededTime)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	first := inprocess.Start(e, clk, opts)
	start := clk.Now()
	waitCachedNodes(e, first, group, 1)
	first.RunOnce()
	if !hasTaint(t, e, node, scaledown.DeletionCandidateTaint) {
		t.Fatalf("the empty node is not marked unneeded after the first loop: %s", first.NodeVerdict(node))
	}
	first.Step(8 * time.Minute)
	first.RunOnce()
	first.Stop()

	second := inprocess.Start(e, clk, opts)
	waitCachedNodes(e, second, group, 1)
	for _, at := range []time.Duration{0, time.Minute + 50*time.Second} { // 8m, then 9m50s
		second.Step(at)
		second.RunOnce()
		if hasTaint(t, e, node, scaledown.ToBeDeletedTaint) || len(itest.NodeNames(e, group)) != 1 {
			t.Fatalf("the node is being removed %v after it became unneeded, before the unneeded time", clk.Since(start))
		}
	}
	second.Step(15 * time.Second) // 10m05s
	second.RunOnce()
	second.StepUntil(60*time.Second, "the node removed", func(context.Context) (bool, error) {
		return len(itest.NodeNames(e, group)) == 0, nil
	})
}

// TestDelayAfterAddAtItsDefault: three nodes added for three pods stay
// --scale-down-delay-after-add (upstream's 10 minutes) after the scale-up
// although their pods are gone and the unneeded time (1 minute here) has
// long passed; then one loop removes all three, as one bulk of empty nodes.
func TestDelayAfterAddAtItsDefault(t *testing.T) {
	e := framework.New(t)
	group := framework.UniqueName("bulk")
	path := itest.GroupsConfig(e, group)
	itest.DumpPods(e)
	opts := inprocess.Options(e, path, func(o *config.Options) { o.NodeGroupDefaults.ScaleDownUnneededTime = time.Minute })
	if opts.ScaleDownDelayAfterAdd != 10*time.Minute {
		t.Fatalf("the default delay after add is %v, want upstream's 10m", opts.ScaleDownDelayAfterAdd)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	p := inprocess.Start(e, clk, opts)
	itest.CreatePods(e, "job", 3, "3", map[string]string{"pool": group}) // one node each
	e.Eventually(30*time.Second, "the pods pending in the loop's cache", func(context.Context) (bool, error) {
		pods, err := p.Informers.Listers.Pods.Pods(e.Namespace).List(labels.Everything())
		return len(pods) == 3, err
	})
	e.Eventually(30*time.Second, "the scheduler's verdict on the pods", func(context.Context) (bool, error) {
		pods, err := p.Informers.Listers.Pods.Pods(e.Namespace).List(labels.Everything())
		for _, pod := range pods {
			if !unschedulable(pod) {
				return false, err
			}
		}
		return err == nil, err
	})
	p.CatchUp()
	start := clk.Now()
	if r := p.RunOnce(); !r.Productive {
		t.Fatalf("the loop did nothing for three pending pods: %+v", r)
	}
	e.Eventually(60*time.Second, "3 pods Running", func(ctx context.Context) (bool, error) { return itest.AllRunning(ctx, e, 3) })
	if err := e.Client.CoreV1().Pods(e.Namespace).DeleteCollection(e.Context(), metav1.DeleteOptions{GracePeriodSeconds: new(int64)},
		metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(30*time.Second, "the pods gone from the loop's cache", func(context.Context) (bool, error) {
		pods, err := p.Informers.Listers.Pods.Pods(e.Namespace).List(labels.Everything())
		return len(pods) == 0, err
	})
	waitCachedNodes(e, p, group, 3)
	for _, step := range []time.Duration{time.Minute, 2 * time.Minute, 6*time.Minute + 50*time.Second} { // to 9m50s
		p.Step(step)
		p.RunOnce()
		if got := gauge(t, p, "cluster_autoscaler_scale_down_in_cooldown"); got != 1 {
			t.Errorf("scale_down_in_cooldown = %v %v after the scale-up, want 1", got, clk.Since(start))
		}
		if n := len(itest.NodeNames(e, group)); n != 3 {
			t.Fatalf("%d nodes left within the delay after add, want 3", n)
		}
	}
	p.Step(15 * time.Second) // 10m05s
	p.RunOnce()
	// No loop runs after this one: all three go in it, or the test fails.
	p.StepUntil(60*time.Second, "the three nodes removed by one loop", func(context.Context) (bool, error) {
		return len(itest.NodeNames(e, group)) == 0, nil
	})
}

func unschedulable(pod *apiv1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == apiv1.PodScheduled && c.Status == apiv1.ConditionFalse && c.Reason == apiv1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// waitCachedNodes waits until the loop's node informer holds n nodes of
// group, all Ready and without the node lifecycle controller's taints (its
// not-ready taint on a new node makes the node not started).
func waitCachedNodes(e *framework.Env, p *inprocess.Autoscaler, group string, n int) {
	e.T.Helper()
	sel := labels.SelectorFromSet(labels.Set{"pool": group})
	e.Eventually(30*time.Second, "the loop's cache holding the group's nodes, Ready and untainted", func(context.Context) (bool, error) {
		nodes, err := p.Informers.Listers.Nodes.List(sel)
		ready := 0
		for _, node := range nodes {
			for _, c := range node.Status.Conditions {
				if c.Type == apiv1.NodeReady && c.Status == apiv1.ConditionTrue && !lifecycleTainted(node) {
					ready++
				}
			}
		}
		return len(nodes) == n && ready == n, err
	})
}

// gauge is the value of the gauge family name (one series, no labels) in
// the in-process autoscaler's registry.
func gauge(t *testing.T, p *inprocess.Autoscaler, name string) float64 {
	t.Helper()
	families, err := p.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no single series of %s", name)
	return 0
}

func hasTaint(t *testing.T, e *framework.Env, node, key string) bool {
	t.Helper()
	n, err := e.Client.CoreV1().Nodes().Get(e.Context(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return itest.HasTaintKey(n, key)
}

func lifecycleTainted(node *apiv1.Node) bool {
	for _, t := range node.Spec.Taints {
		if strings.HasPrefix(t.Key, "node.kubernetes.io/") {
			return true
		}
	}
	return false
}
