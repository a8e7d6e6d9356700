package scaleup

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// holdFinalizer keeps a preempted pod terminating until the test lets it
// go, so that the scheduler's nomination lasts as long as the test needs.
const holdFinalizer = "example.com/hold"

// TestNominatedPodNeedsNoScaleUp: the real scheduler preempts a
// lower-priority pod to make room for a high-priority one and nominates
// the node (status.nominatedNodeName); while the preempted pod terminates,
// the autoscaler neither scales up for the nominated pod nor removes its
// node (whose only running pod, the victim, could move elsewhere); once the
// victim is gone the pod runs on that node.
func TestNominatedPodNeedsNoScaleUp(t *testing.T) {
	e := framework.New(t)
	group := framework.UniqueName("nominated")
	path := itest.GroupsConfig(e, group)
	itest.DumpPods(e)
	low, high := priorityClass(e, "low", 100), priorityClass(e, "high", 5000)
	t.Cleanup(func() { releaseHeldPods(e) })

	// a runs the victim (1 of 4 cores: under the utilisation threshold); b
	// runs a 2-core pod of high priority, the victim's replacement fits
	// there, the 3.5-core pod does not.
	a, b := group+"-a", group+"-b"
	itest.GroupNode(e, group, a, nil)
	one := int32(1)
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "victim", Namespace: e.Namespace},
		Spec: appsv1.ReplicaSetSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "victim"}},
			Template: apiv1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "victim"},
				Finalizers: []string{holdFinalizer}},
				Spec: prioritySpec(group, low, "1")}}}
	if _, err := e.Client.AppsV1().ReplicaSets(e.Namespace).Create(e.Context(), rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(30*time.Second, "the victim Running on a", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 1)
	})
	itest.GroupNode(e, group, b, nil)
	busy := framework.MakePod(e.Namespace, "busy").Obj()
	busy.Spec = prioritySpec(group, high, "2")
	busy.Spec.NodeSelector["kubernetes.io/hostname"] = b
	createPod(e, busy)
	e.Eventually(30*time.Second, "busy Running on b", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 2)
	})

	pod := framework.MakePod(e.Namespace, "important").Obj()
	pod.Spec = prioritySpec(group, high, "3500m")
	createPod(e, pod)
	e.Eventually(30*time.Second, "the scheduler nominating a for the pod", func(ctx context.Context) (bool, error) {
		got, err := e.Client.CoreV1().Pods(e.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && got.Status.NominatedNodeName == a && got.Spec.NodeName == "", err
	})
	// Started only now: before the nomination a was rightly unneeded.
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleDownArgs(e, path)...)
	e.Eventually(30*time.Second, "the autoscaler looping", func(context.Context) (bool, error) {
		return p.Log.Contains(`"Loop summary"`), nil
	})
	// Long enough for the old scale-up (the next loop) and for a's removal
	// (--scale-down-unneeded-time=3s, the victim could move to b).
	time.Sleep(12 * time.Second)
	if p.Log.Contains(`"Scaled up node group"`) || len(itest.NodeNames(e, group)) != 2 {
		t.Fatalf("scaled up for a pod the scheduler nominated to an existing node: nodes %v", itest.NodeNames(e, group))
	}
	if n, err := e.Client.CoreV1().Nodes().Get(e.Context(), a, metav1.GetOptions{}); err != nil || len(n.Spec.Taints) > 0 {
		t.Fatalf("node a: %v, taints %v; want it kept, untainted, for the nominated pod", err, n.Spec.Taints)
	}
	if !p.Log.Written(`"Pod nominated by the scheduler counted on its node"`) {
		t.Error("the log does not say the nominated pod was counted on its node")
	}

	releaseHeldPods(e) // the victim goes
	e.Eventually(60*time.Second, "the nominated pod Running on a", func(ctx context.Context) (bool, error) {
		got, err := e.Client.CoreV1().Pods(e.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && got.Spec.NodeName == a && got.Status.Phase == apiv1.PodRunning, err
	})
	if p.Log.Contains(`"Scaled up node group"`) {
		t.Errorf("scaled up; nodes %v", itest.NodeNames(e, group))
	}
}

// priorityClass creates a PriorityClass of value for the test and returns
// its name.
func priorityClass(e *framework.Env, name string, value int32) string {
	e.T.Helper()
	name += "-" + e.Namespace
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
	if _, err := e.Client.SchedulingV1().PriorityClasses().Create(e.Context(), pc, metav1.CreateOptions{}); err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(func() {
		_ = e.Client.SchedulingV1().PriorityClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// prioritySpec is a pod spec pinned to pool, of PriorityClass class,
// requesting cpu.
func prioritySpec(pool, class, cpu string) apiv1.PodSpec {
	return apiv1.PodSpec{NodeSelector: map[string]string{"pool": pool}, PriorityClassName: class,
		Containers: []apiv1.Container{{Name: "c", Image: "fake", Resources: apiv1.ResourceRequirements{
			Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse(cpu)}}}}}
}

func createPod(e *framework.Env, p *apiv1.Pod) {
	e.T.Helper()
	if _, err := e.Client.CoreV1().Pods(e.Namespace).Create(e.Context(), p, metav1.CreateOptions{}); err != nil {
		e.T.Fatal(err)
	}
}

// releaseHeldPods removes holdFinalizer from the test's pods: those being
// deleted go.
func releaseHeldPods(e *framework.Env) {
	ctx := context.Background()
	pods, err := e.Client.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		e.T.Error(err)
		return
	}
	for _, p := range pods.Items {
		if len(p.Finalizers) == 0 {
			continue
		}
		_, err := e.Client.CoreV1().Pods(e.Namespace).Patch(ctx, p.Name, types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		if err != nil {
			e.T.Errorf("releasing pod %s: %v", p.Name, err)
		}
	}
}
