package clusterapi

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"k8s.io/autoscaler/cluster-autoscaler/test/capi"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// TestClusterAPIScalesFromZeroWithSpecTaints: a MachineDeployment at zero
// whose spec.template.spec.taints has dedicated=<name>:NoSchedule (and no
// taints annotation) keeps that field on the API server, and its template
// node carries the taint: a pod without the toleration is told so and does
// not scale it up, one with the toleration does; once the tainted node
// exists, the first pod still neither runs there nor makes another.
func TestClusterAPIScalesFromZeroWithSpecTaints(t *testing.T) {
	e := framework.New(t)
	itest.DumpPods(e)
	dyn := itest.StartCAPI(e)
	md := framework.UniqueName("tainted")
	taint := apiv1.Taint{Key: "dedicated", Value: md, Effect: apiv1.TaintEffectNoSchedule}
	if err := capi.CreateMachineTemplate(e.Context(), dyn, e.Namespace, md, capi.Machine{CPU: "4", Memory: "16Gi"}, nil); err != nil {
		t.Fatal(err)
	}
	ann := itest.CAPISizes(0, 3)
	ann["capacity.cluster-autoscaler.kubernetes.io/cpu"] = "4"
	ann["capacity.cluster-autoscaler.kubernetes.io/memory"] = "16Gi"
	ann["capacity.cluster-autoscaler.kubernetes.io/labels"] = capi.PoolLabel + "=" + md
	obj := capi.MachineDeployment(e.Namespace, itest.CAPICluster, md, md, 0, ann)
	if err := capi.SetTaints(obj, []apiv1.Taint{taint}); err != nil {
		t.Fatal(err)
	}
	res := dyn.Resource(capi.GVR("machinedeployments")).Namespace(e.Namespace)
	created, err := res.Create(e.Context(), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Cluster API releases without the field (v1.11) have it pruned here.
	kept, _, _ := unstructured.NestedSlice(created.Object, "spec", "template", "spec", "taints")
	if len(kept) != 1 {
		t.Fatalf("spec.template.spec.taints as stored = %v, want the one taint (are %s's CRDs installed?)", kept, capi.Module)
	}

	intolerant := framework.MakePod(e.Namespace, "intolerant").Req("1", "1Gi").NodeSelector(capi.PoolLabel, md).Obj()
	if _, err := e.Client.CoreV1().Pods(e.Namespace).Create(e.Context(), intolerant, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := itest.StartAutoscaler(t, "autoscaler", itest.CAPIArgs(e)...)
	want := fmt.Sprintf("1 node(s) had untolerated taint(s) (dedicated=%s:NoSchedule)", md)
	var got []string
	e.Eventually(60*time.Second, "NotTriggerScaleUp on intolerant naming the taint", func(ctx context.Context) (bool, error) {
		var err error
		got, err = itest.PodEventMessages(ctx, e, "intolerant", "NotTriggerScaleUp")
		return len(got) > 0, err
	})
	for _, msg := range got {
		if !strings.Contains(msg, want) {
			t.Errorf("NotTriggerScaleUp on intolerant: %q, want it to say %q", msg, want)
		}
	}
	if n := itest.MDReplicas(e, dyn, md); n != 0 {
		t.Fatalf("replicas = %d for a pod that does not tolerate the template's taint, want 0", n)
	}

	tolerant := framework.MakePod(e.Namespace, "tolerant").Req("1", "1Gi").NodeSelector(capi.PoolLabel, md).Obj()
	tolerant.Spec.Tolerations = []apiv1.Toleration{{Key: taint.Key, Operator: apiv1.TolerationOpEqual, Value: taint.Value,
		Effect: taint.Effect}}
	if _, err := e.Client.CoreV1().Pods(e.Namespace).Create(e.Context(), tolerant, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(120*time.Second, "tolerant Running", func(ctx context.Context) (bool, error) {
		pod, err := e.Client.CoreV1().Pods(e.Namespace).Get(ctx, "tolerant", metav1.GetOptions{})
		return err == nil && pod.Status.Phase == apiv1.PodRunning, err
	})
	if n := itest.MDReplicas(e, dyn, md); n != 1 {
		t.Errorf("replicas = %d after the tolerating pod's scale-up, want 1", n)
	}
	if !p.Log.Written("Scaled Cluster API node group up") {
		t.Error("no scale-up of the Cluster API group logged")
	}
	pod, err := e.Client.CoreV1().Pods(e.Namespace).Get(e.Context(), "tolerant", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node, err := e.Client.CoreV1().Nodes().Get(e.Context(), pod.Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !hasTaint(node.Spec.Taints, taint) {
		t.Errorf("node %s has taints %v, want %v (copied from its Machine)", node.Name, node.Spec.Taints, taint)
	}

	// Three more loops decide on the intolerant pod with the tainted node
	// there: it stays pending and the group at one.
	refusals := func() int {
		n := 0
		for _, line := range strings.Split(p.Log.String(), "\n") {
			if strings.Contains(line, `"Pod did not trigger a scale-up"`) && strings.Contains(line, e.Namespace+"/intolerant") {
				n++
			}
		}
		return n
	}
	before := refusals()
	e.Eventually(60*time.Second, "three more loops refusing intolerant", func(context.Context) (bool, error) {
		return refusals() >= before+3, nil
	})
	if n := itest.MDReplicas(e, dyn, md); n != 1 {
		t.Errorf("replicas = %d with only the intolerant pod pending, want 1", n)
	}
	got2, err := e.Client.CoreV1().Pods(e.Namespace).Get(e.Context(), "intolerant", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got2.Spec.NodeName != "" {
		t.Errorf("intolerant was scheduled to %s, which has the taint it does not tolerate", got2.Spec.NodeName)
	}
}

func hasTaint(taints []apiv1.Taint, want apiv1.Taint) bool {
	for _, t := range taints {
		if t.Key == want.Key && t.Value == want.Value && t.Effect == want.Effect {
			return true
		}
	}
	return false
}
