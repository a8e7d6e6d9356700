package burst

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// Workloads whose controllers create their pods over time: an OrderedReady
// StatefulSet (one pod at a time, each once the previous is Ready) and an
// indexed Job whose creations arrive in steps. With the plan-ahead (the
// default) the first loop that sees one of their pods unschedulable counts
// the pods still to create as stand-ins and makes room for all of them in
// one decision; with --enable-proactive-scaleup=false each step is its own
// decision (the staircase). Each run logs its figures (docs/benchmarks.md,
// "Plan-ahead for StatefulSets and Jobs").

// overTimeRun is what one run measured: scale-up decisions, the group's
// largest target, and the time from the workload's creation until all its
// pods were bound to a node.
type overTimeRun struct {
	decisions, nodes int
	allBound         time.Duration
}

// boundPodsOf counts the pods of app bound to a node (running, or finished
// there: kwok completes a Job's pods as soon as they run).
func boundPodsOf(ctx context.Context, e *framework.Env, app string) (int, error) {
	pods, err := e.Client.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			n++
		}
	}
	return n, nil
}

// waitAllBound polls until want pods of app are bound and returns the time
// since start.
func waitAllBound(e *framework.Env, app string, want int, start time.Time, timeout time.Duration) time.Duration {
	e.T.Helper()
	var took time.Duration
	e.Eventually(timeout, "all pods of "+app+" bound", func(ctx context.Context) (bool, error) {
		n, err := boundPodsOf(ctx, e, app)
		took = time.Since(start)
		return n >= want, err
	})
	return took
}

func planAheadArgs(e *framework.Env, path string, planAhead bool) []string {
	args := []string{"--kubeconfig=" + e.Kubeconfig, "--namespace=" + e.Namespace, "--cloud-provider=kwok",
		"--kwok-provider-enabled", "--cloud-config=" + path, "--v=2", "--scan-interval=2s",
		// One replica: a lease renewal missed on a busy machine would stop it mid-run.
		"--leader-elect=false"}
	if !planAhead {
		args = append(args, "--enable-proactive-scaleup=false")
	}
	return args
}

// runOrderedStatefulSet creates an OrderedReady StatefulSet of 64 one-CPU
// replicas for a group of 4-CPU nodes that register 5s after a scale-up,
// and measures until all 64 are bound.
func runOrderedStatefulSet(t *testing.T, planAhead bool) overTimeRun {
	e := framework.New(t)
	itest.DumpPods(e)
	group, path := burstGroup(e, "ordered", 20, "5s")
	p := startLooping(t, e, planAheadArgs(e, path, planAhead)...)
	replicas := int32(64)
	labels := map[string]string{"app": "ordered"}
	start := time.Now()
	if _, err := e.Client.AppsV1().StatefulSets(e.Namespace).Create(e.Context(), &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "ordered"},
		Spec: appsv1.StatefulSetSpec{Replicas: &replicas, PodManagementPolicy: appsv1.OrderedReadyPodManagement,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: apiv1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: oneCPUPodSpec(group)}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	took := waitAllBound(e, "ordered", 64, start, 8*time.Minute)
	settledAt(e, p, group, largestTarget(p.Log.String(), group))
	log := p.Log.String()
	run := overTimeRun{decisions: strings.Count(log, `"Scaled up node group"`), nodes: largestTarget(log, group), allBound: took}
	t.Logf("OrderedReady StatefulSet of 64, plan-ahead %v: %d scale-up decisions, %d nodes, all bound after %s",
		planAhead, run.decisions, run.nodes, took.Round(100*time.Millisecond))
	if strings.Contains(log, "Node group backed off") {
		t.Errorf("a group was backed off")
	}
	return run
}

// TestOrderedStatefulSetInOneDecision: with the plan-ahead, the 64 replicas
// get their 16 nodes in one decision (the first loop sees replica 0
// unschedulable and counts the 63 still to create); without it, every
// fourth replica finds no room and waits for its own node (16 decisions).
func TestOrderedStatefulSetInOneDecision(t *testing.T) {
	var on, off overTimeRun
	t.Run("plan-ahead", func(t *testing.T) { on = runOrderedStatefulSet(t, true) })
	if on.decisions != 1 || on.nodes != 16 {
		t.Errorf("with the plan-ahead: %d decisions to %d nodes, want 1 to 16", on.decisions, on.nodes)
	}
	if !staircaseMeasured(t, on) {
		return
	}
	t.Run("staircase", func(t *testing.T) { off = runOrderedStatefulSet(t, false) })
	if off.nodes != 16 {
		t.Errorf("without the plan-ahead: %d nodes, want 16", off.nodes)
	}
	if off.decisions <= on.decisions {
		t.Errorf("without the plan-ahead %d decisions, with it %d: no staircase measured", off.decisions, on.decisions)
	}
	t.Logf("staircase %d decisions in %s; plan-ahead %d in %s", off.decisions, off.allBound.Round(100*time.Millisecond),
		on.decisions, on.allBound.Round(100*time.Millisecond))
}

// runSteppedJob creates an indexed Job of parallelism and completions 64
// (one CPU each, 4-CPU nodes registering 30s after a scale-up) whose pod
// creations a webhook lets through 8 at a time every 3 seconds, and
// measures until all 64 pods were bound.
func runSteppedJob(t *testing.T, planAhead bool) overTimeRun {
	e := framework.New(t)
	itest.DumpPods(e)
	group, path := burstGroup(e, "stepped", 20, "30s")
	gate := newReplicaGate(e, "stepped")
	p := startLooping(t, e, planAheadArgs(e, path, planAhead)...)
	n := int32(64)
	indexed := batchv1.IndexedCompletion
	spec := oneCPUPodSpec(group)
	spec.RestartPolicy = apiv1.RestartPolicyNever
	start := time.Now()
	if _, err := e.Client.BatchV1().Jobs(e.Namespace).Create(e.Context(), &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "stepped"},
		Spec: batchv1.JobSpec{Parallelism: &n, Completions: &n, CompletionMode: &indexed,
			Template: apiv1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "stepped"}}, Spec: spec}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for released := 0; released < 64; released += 8 {
		gate.release(8)
		time.Sleep(3 * time.Second)
	}
	took := waitAllBound(e, "stepped", 64, start, 5*time.Minute)
	settledAt(e, p, group, largestTarget(p.Log.String(), group))
	log := p.Log.String()
	run := overTimeRun{decisions: strings.Count(log, `"Scaled up node group"`), nodes: largestTarget(log, group), allBound: took}
	t.Logf("indexed Job of 64 created in steps of 8, plan-ahead %v: %d scale-up decisions, %d nodes, all bound after %s",
		planAhead, run.decisions, run.nodes, took.Round(100*time.Millisecond))
	job, err := e.Client.BatchV1().Jobs(e.Namespace).Get(e.Context(), "stepped", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if job.Status.Failed > 0 {
		t.Errorf("%d pods of the Job failed", job.Status.Failed)
	}
	if strings.Contains(log, "Node group backed off") {
		t.Errorf("a group was backed off")
	}
	return run
}

// TestSteppedJobInOneDecision: with the plan-ahead, the first loop that
// sees the Job's first pods unschedulable counts the rest of its 64 and
// makes room for all (16 nodes) in one decision; without it, each step of
// creations that finds no room is its own decision.
func TestSteppedJobInOneDecision(t *testing.T) {
	var on, off overTimeRun
	t.Run("plan-ahead", func(t *testing.T) { on = runSteppedJob(t, true) })
	if on.decisions != 1 || on.nodes != 16 {
		t.Errorf("with the plan-ahead: %d decisions to %d nodes, want 1 to 16", on.decisions, on.nodes)
	}
	if !staircaseMeasured(t, on) {
		return
	}
	t.Run("staircase", func(t *testing.T) { off = runSteppedJob(t, false) })
	if off.decisions <= on.decisions {
		t.Errorf("without the plan-ahead %d decisions, with it %d: no staircase measured", off.decisions, on.decisions)
	}
	t.Logf("staircase %d decisions to %d nodes in %s; plan-ahead %d to %d in %s", off.decisions, off.nodes,
		off.allBound.Round(100*time.Millisecond), on.decisions, on.nodes, on.allBound.Round(100*time.Millisecond))
}

// staircaseMeasured says whether the comparison without the plan-ahead (the
// staircase, minutes of waiting for one node after the other) runs: only
// in make test-slow ($INTEGRATION_SLOW); make test checks the plan-ahead's
// one decision and logs that the comparison was left to make test-slow.
func staircaseMeasured(t *testing.T, on overTimeRun) bool {
	t.Helper()
	if os.Getenv(itest.SlowEnv) == "" {
		t.Logf("plan-ahead: %d decisions to %d nodes in %s; the staircase to compare with runs in make test-slow (%s=1)",
			on.decisions, on.nodes, on.allBound.Round(100*time.Millisecond), itest.SlowEnv)
		return false
	}
	return true
}
