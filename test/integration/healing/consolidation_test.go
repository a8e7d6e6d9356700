package healing

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest/inprocess"
)

// keeper creates a one-pod Deployment whose pod may not be evicted
// (safe-to-evict "false"), so that its node is never consolidated.
func keeper(e *framework.Env, pool string) {
	e.T.Helper()
	one := int32(1)
	labels := map[string]string{"app": "keeper"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "keeper", Namespace: e.Namespace},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: apiv1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels,
				Annotations: map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}},
				Spec: apiv1.PodSpec{NodeSelector: map[string]string{"pool": pool},
					Containers: []apiv1.Container{{Name: "c", Image: "fake", Resources: apiv1.ResourceRequirements{
						Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("1"),
							apiv1.ResourceMemory: resource.MustParse("1Gi")}}}}}}}}
	if _, err := e.Client.AppsV1().Deployments(e.Namespace).Create(e.Context(), d, metav1.CreateOptions{}); err != nil {
		e.T.Fatal(err)
	}
}

func setUnschedulable(e *framework.Env, node string, on bool) {
	e.T.Helper()
	n, err := e.Client.CoreV1().Nodes().Get(e.Context(), node, metav1.GetOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	n.Spec.Unschedulable = on
	if _, err := e.Client.CoreV1().Nodes().Update(e.Context(), n, metav1.UpdateOptions{}); err != nil {
		e.T.Fatal(err)
	}
}

// TestConsolidationMovesPodsOneAtATimeAsThePDBAllows is the case upstream's
// scale-down never acts on (issue 40): a node at 50% utilisation holding two
// pods of a Deployment whose PodDisruptionBudget allows one disruption at a
// time. With scale-down off and --consolidation-enabled, the planner finds
// that both pods fit on the other node (which a pod that may not be evicted
// keeps), the engine drains the node a pod at a time as the eviction API
// allows, and deletes it by name; the budget is never broken and the other
// node is never touched.
func TestConsolidationMovesPodsOneAtATimeAsThePDBAllows(t *testing.T) {
	e := framework.New(t)
	itest.DumpPods(e)
	pool, path := smallPool(e, "consolidate", 3)
	opts := inprocess.Options(e, path, func(o *config.Options) {
		o.ScaleDownEnabled = false // only consolidation removes nodes here
		o.Disruption.ConsolidationEnabled = true
		o.DisruptionSettleTime = 0
	})
	clk := clocktesting.NewFakeClock(time.Now())
	p := inprocess.Start(e, clk, opts)
	if p.Loop.Disruption == nil {
		t.Fatal("no disruption engine with --consolidation-enabled")
	}
	loop := func() {
		p.Step(5 * time.Second)
		p.CatchUp()
		p.RunOnce()
	}
	podsOn := func(ctx context.Context, app, node string) (int, error) {
		list, err := e.Client.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return 0, err
		}
		n := 0
		for _, p := range list.Items {
			if p.Spec.NodeName == node && p.DeletionTimestamp == nil && p.Status.Phase == apiv1.PodRunning {
				n++
			}
		}
		return n, nil
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
		n, err := podsOn(ctx, "keeper", kept)
		return n == 1, err
	})
	// Cordoned, the keeper's node makes the web pods scale up a node of
	// their own: two pods of 1 CPU on a 4-CPU node, 50% utilisation.
	setUnschedulable(e, kept, true)
	itest.Deployment(e, "web", 2, map[string]string{"pool": pool})
	var drained string
	e.Eventually(120*time.Second, "both web pods Running on a second node", func(ctx context.Context) (bool, error) {
		loop()
		list, err := poolNodeList(ctx, e, pool)
		if err != nil || len(list) != 2 {
			return false, err
		}
		for _, n := range list {
			if n.Name != kept {
				drained = n.Name
			}
		}
		n, err := podsOn(ctx, "web", drained)
		return n == 2, err
	})
	minReady, stopSampling := itest.WebPDBAndSampler(e)
	defer stopSampling()

	setUnschedulable(e, kept, false)
	e.Eventually(180*time.Second, "node "+drained+" consolidated away", func(ctx context.Context) (bool, error) {
		loop()
		if n, err := podsOn(ctx, "keeper", kept); err != nil || n != 1 {
			return false, fmt.Errorf("the keeper left %s (%d running, %v): a protected node was disrupted", kept, n, err)
		}
		_, err := e.Client.CoreV1().Nodes().Get(ctx, drained, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	e.Eventually(60*time.Second, "both web pods Running beside the keeper", func(ctx context.Context) (bool, error) {
		n, err := podsOn(ctx, "web", kept)
		return n == 2, err
	})
	if got := minReady(); got < 1 {
		t.Errorf("Ready pods of web fell to %d during the drain: the PDB (minAvailable 1) was not honoured", got)
	}
	e.Eventually(30*time.Second, "DisruptionStarted and DisruptionSucceeded on "+drained, func(ctx context.Context) (bool, error) {
		ev, err := itest.NodeEvents(ctx, e, drained)
		return err == nil && strings.Contains(ev["DisruptionStarted"], "consolidatable") && ev["DisruptionSucceeded"] != "", err
	})
	if ev, err := itest.NodeEvents(e.Context(), e, kept); err == nil && ev["DisruptionStarted"] != "" {
		t.Errorf("the keeper's node %s was disrupted: %q", kept, ev["DisruptionStarted"])
	}
}

// TestExpiredNodeReplacedFirst: with --max-node-lifetime, a node past the
// lifetime is replaced by a node of its group, Ready before the old one
// drains, and deleted by name; the workload keeps running.
func TestExpiredNodeReplacedFirst(t *testing.T) {
	e := framework.New(t)
	itest.DumpPods(e)
	pool, path := smallPool(e, "expire", 2)
	opts := inprocess.Options(e, path, func(o *config.Options) {
		o.Disruption.MaxNodeLifetime = time.Hour
		o.DisruptionSettleTime = 0
	})
	clk := clocktesting.NewFakeClock(time.Now())
	p := inprocess.Start(e, clk, opts)
	if p.Loop.Disruption == nil {
		t.Fatal("no disruption engine with --max-node-lifetime")
	}
	itest.Deployment(e, "web", 1, map[string]string{"pool": pool})
	var old string
	e.Eventually(90*time.Second, "web Running on a node", func(ctx context.Context) (bool, error) {
		p.Step(5 * time.Second)
		p.CatchUp()
		p.RunOnce()
		list, err := poolNodeList(ctx, e, pool)
		if err != nil || len(list) != 1 {
			return false, err
		}
		old = list[0].Name
		n, err := itest.ReadyWebPods(ctx, e)
		return n == 1, err
	})
	// Younger than the lifetime: kept through loops.
	for range 3 {
		p.Step(10 * time.Minute)
		p.CatchUp()
		p.RunOnce()
	}
	if ev, err := itest.NodeEvents(e.Context(), e, old); err != nil || ev["DisruptionStarted"] != "" {
		t.Fatalf("node %s disrupted at 30 minutes of a one-hour lifetime: %q (%v)", old, ev["DisruptionStarted"], err)
	}
	p.Step(31 * time.Minute)
	e.Eventually(120*time.Second, "node "+old+" replaced and deleted", func(ctx context.Context) (bool, error) {
		p.Step(5 * time.Second)
		p.CatchUp()
		p.RunOnce()
		_, err := e.Client.CoreV1().Nodes().Get(ctx, old, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	e.Eventually(60*time.Second, "web Running on the replacement", func(ctx context.Context) (bool, error) {
		list, err := poolNodeList(ctx, e, pool)
		if err != nil || len(list) != 1 || list[0].Name == old {
			return false, err
		}
		n, err := itest.ReadyWebPods(ctx, e)
		return n == 1, err
	})
	e.Eventually(30*time.Second, "DisruptionStarted (expired) and DisruptionSucceeded on "+old, func(ctx context.Context) (bool, error) {
		ev, err := itest.NodeEvents(ctx, e, old)
		return err == nil && strings.Contains(ev["DisruptionStarted"], "expired") && ev["DisruptionSucceeded"] != "", err
	})
}
