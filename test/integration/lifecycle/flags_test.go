package lifecycle

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/yaml"

	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// TestSchedulerNameFlags: with --allowed-scheduler-names naming only a
// custom scheduler, an unschedulable pod of kube-scheduler triggers nothing;
// with that scheduler in --bypassed-scheduler-names, its pod (which no
// scheduler ever processes here) triggers a scale-up at once.
func TestSchedulerNameFlags(t *testing.T) {
	e := framework.New(t)
	path, small, large := itest.ScaleUpConfig(e)
	itest.DumpPods(e)
	const custom = "custom-scheduler"
	ignored := framework.MakePod(e.Namespace, "default-scheduler-pod").Req("1", "1Gi").NodeSelector("pool", small).Obj()
	if _, err := e.Client.CoreV1().Pods(e.Namespace).Create(e.Context(), ignored, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(20*time.Second, "kube-scheduler marks its pod unschedulable", func(ctx context.Context) (bool, error) {
		p, err := e.Client.CoreV1().Pods(e.Namespace).Get(ctx, ignored.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == apiv1.PodScheduled && c.Reason == apiv1.PodReasonUnschedulable {
				return true, nil
			}
		}
		return false, nil
	})
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--allowed-scheduler-names="+custom,
		"--bypassed-scheduler-names="+custom)...)
	// Loops run while only the ignored pod is pending.
	e.Eventually(30*time.Second, "three loops", func(context.Context) (bool, error) {
		return itest.CountLines(p.Log.String(), `"Loop summary"`) >= 3, nil
	})
	if got := itest.NodesPerPool(e)[small]; got != 0 {
		t.Fatalf("%d nodes added for a pod of a scheduler outside --allowed-scheduler-names", got)
	}
	bypassed := framework.MakePod(e.Namespace, "custom-scheduler-pod").Req("8", "1Gi").NodeSelector("pool", large).Obj()
	bypassed.Spec.SchedulerName = custom
	if _, err := e.Client.CoreV1().Pods(e.Namespace).Create(e.Context(), bypassed, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(30*time.Second, "a node for the custom scheduler's unprocessed pod", func(context.Context) (bool, error) {
		return itest.NodesPerPool(e)[large] == 1, nil
	})
	time.Sleep(3 * time.Second) // more loops
	if got := itest.NodesPerPool(e); got[small] != 0 || got[large] != 1 {
		t.Errorf("nodes per pool = %v, want %s:0 %s:1", got, small, large)
	}
}

// TestStartupAndStatusTaintsInReadiness: nodes that are Ready but carry a
// startup taint (a --startup-taint key, or the built-in prefix) count as
// starting, not unready, so a cluster that tolerates no unready node stays
// healthy and scales; a node with a status taint counts as ready.
func TestStartupAndStatusTaintsInReadiness(t *testing.T) {
	e := framework.New(t)
	group := framework.UniqueName("tainted")
	path := itest.OneGroupConfig(e, group, 10, "registrationDelay: 1s")
	taints := map[string]string{
		framework.UniqueName("booting"): "example.com/agent-booting",
		framework.UniqueName("gpu"):     "startup-taint.cluster-autoscaler.kubernetes.io/gpu-driver",
		framework.UniqueName("status"):  "status-taint.cluster-autoscaler.kubernetes.io/degraded",
	}
	for name, key := range taints {
		n := framework.MakeNode(name).Obj()
		n.Spec.Taints = []apiv1.Taint{{Key: key, Value: "true", Effect: apiv1.TaintEffectNoSchedule}}
		e.CreateNode(n)
	}
	e.Eventually(30*time.Second, "kwok marks the tainted nodes Ready", func(ctx context.Context) (bool, error) {
		for name := range taints {
			n, err := e.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil || !itest.NodeReady(n) {
				return false, err
			}
		}
		return true, nil
	})
	itest.DumpPods(e)
	itest.CreatePods(e, "web", 2, "1", map[string]string{"pool": group})
	itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--ok-total-unready-count=0",
		"--max-total-unready-percentage=0", "--startup-taint=example.com/agent-booting")...)
	var st *clusterstate.Status
	e.Eventually(30*time.Second, "a status with the tainted nodes counted", func(ctx context.Context) (bool, error) {
		cm, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Get(ctx, "cluster-autoscaler-status", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		st = &clusterstate.Status{}
		if err := yaml.Unmarshal([]byte(cm.Data["status"]), st); err != nil {
			return false, err
		}
		// The first statuses may count the status-tainted node as not
		// started: the informer's first list, served from the API server's
		// watch cache, can precede its Ready condition (seen in CI: loops 1
		// and 2 counted it so, loop 3 ready). Wait until it is counted ready;
		// the startup-tainted ones must still be not started then.
		reg := st.ClusterWide.Health.NodeCounts.Registered
		return reg.Total >= 3 && reg.Ready >= 1, nil
	})
	reg := st.ClusterWide.Health.NodeCounts.Registered
	if reg.NotStarted < 2 || reg.Unready.Total != 0 || reg.Ready < 1 {
		t.Errorf("registered counts %+v: want the two startup-tainted nodes not started, none unready, the status-tainted one ready", reg)
	}
	if st.ClusterWide.Health.Status != clusterstate.HealthHealthy {
		t.Errorf("cluster health %q, want %q", st.ClusterWide.Health.Status, clusterstate.HealthHealthy)
	}
	e.Eventually(60*time.Second, "both pods Running on a new node", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 2)
	})
}

// TestScaleUpFromZeroFalse: with --scale-up-from-zero=false and no ready
// node in the cluster, a pending pod gets no node; once a ready node exists,
// the same pod gets one.
func TestScaleUpFromZeroFalse(t *testing.T) {
	e := framework.New(t)
	e.Eventually(60*time.Second, "a cluster without nodes (earlier tests remove theirs)", func(ctx context.Context) (bool, error) {
		list, err := e.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0, err
	})
	group := framework.UniqueName("fromzero")
	path := itest.OneGroupConfig(e, group, 10, "registrationDelay: 1s")
	itest.DumpPods(e)
	itest.CreatePods(e, "web", 1, "1", map[string]string{"pool": group})
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--scale-up-from-zero=false")...)
	e.Eventually(30*time.Second, "three loops that saw no ready node", func(context.Context) (bool, error) {
		return itest.CountLines(p.Log.String(), "--scale-up-from-zero=false") >= 3, nil
	})
	if got := itest.NodesPerPool(e)[group]; got != 0 {
		t.Fatalf("%d nodes added with no ready node and --scale-up-from-zero=false", got)
	}
	e.CreateNode(framework.MakeNode(framework.UniqueName("ready")).Obj()) // kwok makes it Ready; no pool label
	e.Eventually(60*time.Second, "the pod Running on a node of the group", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 1)
	})
	if got := itest.NodesPerPool(e)[group]; got != 1 {
		t.Errorf("%d nodes of the group, want 1", got)
	}
}

// TestDrainPriorityConfig: with --drain-priority-config=1000:3,0:1 a drained
// node's low-priority pod is evicted first with a 1 s grace period, and its
// high-priority pod only once the low one is gone, with 3 s.
func TestDrainPriorityConfig(t *testing.T) {
	e := framework.New(t)
	group := framework.UniqueName("prio")
	path := itest.GroupsConfig(e, group)
	itest.DumpPods(e)
	itest.GroupNode(e, group, group+"-a", nil)
	classes := map[string]int32{"low-" + e.Namespace: 100, "high-" + e.Namespace: 5000}
	for name, value := range classes {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
		if _, err := e.Client.SchedulingV1().PriorityClasses().Create(e.Context(), pc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = e.Client.SchedulingV1().PriorityClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	one := int32(1)
	for _, app := range []string{"low", "high"} {
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: e.Namespace},
			Spec: appsv1.ReplicaSetSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
				Template: apiv1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
					Spec: apiv1.PodSpec{NodeSelector: map[string]string{"pool": group}, PriorityClassName: app + "-" + e.Namespace,
						Containers: []apiv1.Container{{Name: "c", Image: "fake", Resources: apiv1.ResourceRequirements{
							Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("500m")}}}}}}}}
		if _, err := e.Client.AppsV1().ReplicaSets(e.Namespace).Create(e.Context(), rs, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.Eventually(30*time.Second, "both pods Running on a", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 2)
	})
	// Somewhere to go that is not the group's: a node with the pool label
	// but no group, so it is neither simulated first nor removed.
	e.CreateNode(framework.MakeNode(group+"-spare").Label("pool", group).Obj())
	time.Sleep(2 * time.Second)
	original := map[string]string{} // pod name -> app
	list, err := e.Client.CoreV1().Pods(e.Namespace).List(e.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		original[p.Name] = p.Labels["app"]
	}
	w, err := e.Client.CoreV1().Pods(e.Namespace).Watch(e.Context(), metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var seen []string // "evict <app> <grace>" and "gone <app>", in order
	done := make(chan struct{})
	go func() {
		defer close(done)
		evicted := map[string]bool{}
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*apiv1.Pod)
			if !ok || original[p.Name] == "" {
				continue
			}
			app := original[p.Name]
			switch {
			case ev.Type == watch.Deleted:
				seen = append(seen, "gone "+app)
				if app == "high" {
					return
				}
			case p.DeletionTimestamp != nil && !evicted[p.Name]:
				evicted[p.Name] = true
				seen = append(seen, fmt.Sprintf("evict %s %d", app, *p.DeletionGracePeriodSeconds))
			}
		}
	}()
	args := itest.ScaleUpArgs(e, path, "--scale-down-unneeded-time=3s", "--scale-down-delay-after-add=0s",
		"--node-delete-delay-after-taint=1s", "--drain-priority-config=1000:3,0:1")
	itest.StartAutoscaler(t, "autoscaler", args...)
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		w.Stop()
		<-done
		t.Fatalf("the high-priority pod was not evicted and gone in time; seen %v", seen)
	}
	want := []string{"evict low 1", "gone low", "evict high 3", "gone high"}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("drain %v, want %v", seen, want)
	}
}

// TestScaleDownDelayTypeLocal: a scale-up of one group within
// --scale-down-delay-after-add holds only that group's nodes with
// --scale-down-delay-type-local: the other group's empty node goes (cluster-
// wide, it would wait five minutes).
func TestScaleDownDelayTypeLocal(t *testing.T) {
	e := framework.New(t)
	idle, busy := framework.UniqueName("idle"), framework.UniqueName("busy")
	path := itest.GroupsConfig(e, idle, busy)
	itest.DumpPods(e)
	itest.GroupNode(e, idle, idle+"-n", nil)
	time.Sleep(2 * time.Second) // Ready
	itest.CreatePods(e, "web", 1, "1", map[string]string{"pool": busy})
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleDownArgs(e, path, "--scale-down-delay-after-add=5m",
		"--scale-down-delay-type-local")...)
	e.Eventually(30*time.Second, "the busy group scaled up", func(context.Context) (bool, error) {
		return p.Log.Contains(`"Scaled up node group"`), nil
	})
	e.Eventually(60*time.Second, "the idle group's empty node removed", func(context.Context) (bool, error) {
		return len(itest.NodeNames(e, idle)) == 0, nil
	})
	if got := len(itest.NodeNames(e, busy)); got != 1 {
		t.Errorf("%d nodes in the busy group, want 1", got)
	}
}
