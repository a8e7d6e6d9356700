package burst

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// oneCPUPodSpec is a pod of 1 CPU and 1Gi pinned to a pool.
func oneCPUPodSpec(pool string) apiv1.PodSpec {
	return apiv1.PodSpec{NodeSelector: map[string]string{"pool": pool},
		Containers: []apiv1.Container{{Name: "c", Image: "fake", Resources: apiv1.ResourceRequirements{
			Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("1"),
				apiv1.ResourceMemory: resource.MustParse("1Gi")}}}}}
}

// createReplicaSet creates a ReplicaSet of replicas pods of spec labelled
// app=name.
func createReplicaSet(e *framework.Env, name string, replicas int32, spec apiv1.PodSpec) *appsv1.ReplicaSet {
	e.T.Helper()
	labels := map[string]string{"app": name}
	rs, err := e.Client.AppsV1().ReplicaSets(e.Namespace).Create(e.Context(), &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.Namespace},
		Spec: appsv1.ReplicaSetSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: apiv1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}}},
		metav1.CreateOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	return rs
}

// scaledUpFromTo reads the from and to of a group's scale-up log lines.
var scaledUpFromTo = regexp.MustCompile(`"Scaled up node group".*? from=(\d+) to=(\d+)`)

var scaledUpTo = regexp.MustCompile(`"Scaled up node group".*? nodeGroup="([^"]+)" from=\d+ to=(\d+)`)

// largestTarget is the largest target size the autoscaler's log gave group.
func largestTarget(log, group string) int {
	most := 0
	for _, m := range scaledUpTo.FindAllStringSubmatch(log, -1) {
		if n, _ := strconv.Atoi(m[2]); m[1] == group && n > most {
			most = n
		}
	}
	return most
}

// settledAt waits for two more loops of the autoscaler p and checks that
// the group's largest target is still want.
func settledAt(e *framework.Env, p *itest.AutoscalerProcess, group string, want int) {
	e.T.Helper()
	loops := strings.Count(p.Log.String(), `"Loop summary"`)
	e.Eventually(60*time.Second, "two more loops", func(context.Context) (bool, error) {
		return strings.Count(p.Log.String(), `"Loop summary"`) >= loops+2, nil
	})
	if got := largestTarget(p.Log.String(), group); got != want {
		e.T.Fatalf("the group's target is %d, want %d", got, want)
	}
}

// TestProactiveScaleUpOff: with --enable-proactive-scaleup=false, a
// ReplicaSet of 100 replicas of which 10 exist (a webhook holds the
// controller's other creations) gets the nodes its 10 pods need (3 of 4
// CPU) and no room for the 90 replicas not created yet; with the default
// (true) the same loop would count them (25 nodes). Before the flag acted
// it was accepted and ignored.
func TestProactiveScaleUpOff(t *testing.T) {
	e := framework.New(t)
	itest.DumpPods(e)
	group, path := burstGroup(e, "reactive", 60, "90s")
	gate := newReplicaGate(e, "reactive")
	p := startLooping(t, e, "--kubeconfig="+e.Kubeconfig, "--namespace="+e.Namespace,
		"--cloud-provider=kwok", "--kwok-provider-enabled", "--cloud-config="+path, "--v=2", "--scan-interval=2s", "--enable-proactive-scaleup=false")
	createReplicaSet(e, "reactive", 100, oneCPUPodSpec(group))
	gate.release(10)
	e.Eventually(60*time.Second, "10 pods of the ReplicaSet", func(ctx context.Context) (bool, error) {
		got, err := activePodsOf(ctx, e, "reactive")
		return got == 10, err
	})
	e.Eventually(60*time.Second, "a scale-up", func(context.Context) (bool, error) {
		return largestTarget(p.Log.String(), group) > 0, nil
	})
	settledAt(e, p, group, 3)
	if p.Log.Contains("Counting replicas the ReplicaSet has still to create") {
		t.Errorf("stand-ins counted with --enable-proactive-scaleup=false")
	}
}

// TestRefusedReplicaSetBurstIsBounded: a ReplicaSet of a million replicas in
// a namespace whose ResourceQuota allows 10 pods. The controller creates 10
// and is refused the rest (ReplicaFailure=True); the room counted ahead for
// replicas not created yet is bounded by what arrives: the group gets at
// most the nodes the 10 pods need (3 of 4 CPU) plus one piece of
// --pod-injection-limit=40 one-CPU pods (10 nodes), however many loops run
// while the nodes register. Before this bound every productive loop counted
// a further piece, up to the group's maximum of 100 nodes.
func TestRefusedReplicaSetBurstIsBounded(t *testing.T) {
	e := framework.New(t)
	itest.DumpPods(e)
	group, path := burstGroup(e, "refused", 100, "20s")
	quota, err := e.Client.CoreV1().ResourceQuotas(e.Namespace).Create(e.Context(), &apiv1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "ten-pods"},
		Spec:       apiv1.ResourceQuotaSpec{Hard: apiv1.ResourceList{apiv1.ResourcePods: resource.MustParse("10")}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "the quota's status computed", func(ctx context.Context) (bool, error) {
		q, err := e.Client.CoreV1().ResourceQuotas(e.Namespace).Get(ctx, quota.Name, metav1.GetOptions{})
		return err == nil && q.Status.Hard.Pods().Value() == 10, err
	})
	p := startLooping(t, e, "--kubeconfig="+e.Kubeconfig, "--namespace="+e.Namespace,
		"--cloud-provider=kwok", "--kwok-provider-enabled", "--cloud-config="+path, "--v=2", "--pod-injection-limit=40")

	rs := createReplicaSet(e, "huge", 1000000, oneCPUPodSpec(group))
	e.Eventually(60*time.Second, "the ReplicaSet's further pods refused (ReplicaFailure)", func(ctx context.Context) (bool, error) {
		got, err := e.Client.AppsV1().ReplicaSets(e.Namespace).Get(ctx, rs.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == appsv1.ReplicaSetReplicaFailure && c.Status == apiv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	// The nodes register 20s after the scale-up; until the 10 pods run,
	// they stay unschedulable and every loop counts the ReplicaSet again.
	e.Eventually(3*time.Minute, "the 10 pods the quota allows Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 10)
	})
	log := p.Log.String()
	loops := strings.Count(log, `"Loop summary"`)
	got := largestTarget(log, group)
	t.Logf("the group's largest target: %d nodes, after %d loops", got, loops)
	if got == 0 {
		t.Fatalf("no scale-up for the 10 pods")
	}
	if got > 3+10 {
		t.Errorf("the group was scaled to %d nodes for a ReplicaSet of which the quota admits 10 one-CPU pods; want at most 13 (3 for the pods plus one piece of 40)", got)
	}
	if strings.Contains(log, "Node group backed off") {
		t.Errorf("a group was backed off")
	}
}

// burstGroup writes a kwok config with one group of 4-CPU nodes (four
// one-CPU pods each) up to maxSize, registering after delay, and returns
// its name and path.
func burstGroup(e *framework.Env, prefix string, maxSize int, delay string) (group, path string) {
	e.T.Helper()
	group = framework.UniqueName(prefix)
	return group, itest.WriteKwokConfig(e, fmt.Sprintf(`
nodeGroups:
- name: %[1]s
  maxSize: %[4]d
  template:
    labels: {%[2]s: %[3]s, pool: %[1]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: %[5]s}
`, group, framework.TestNamespaceLabel, e.Namespace, maxSize, delay))
}

// startLooping starts the autoscaler and waits until its informers synced
// and the loop runs.
func startLooping(t *testing.T, e *framework.Env, args ...string) *itest.AutoscalerProcess {
	t.Helper()
	p := itest.StartAutoscaler(t, "autoscaler", args...)
	e.Eventually(30*time.Second, "the autoscaler looping", func(context.Context) (bool, error) {
		return p.Log.Contains("Informer caches synced"), nil
	})
	return p
}
