package dra

import (
	"context"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// notRunningPods counts the test's pods that are not Running.
func notRunningPods(ctx context.Context, e *framework.Env) (int, error) {
	pods, err := e.Client.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods.Items {
		if p.Status.Phase != apiv1.PodRunning {
			n++
		}
	}
	return n, nil
}

// notTriggerScaleUp returns the messages of the NotTriggerScaleUp events
// of the test's pods whose name starts with prefix.
func notTriggerScaleUp(ctx context.Context, e *framework.Env, prefix string) ([]string, error) {
	list, err := e.Client.CoreV1().Events(e.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "reason=NotTriggerScaleUp"})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ev := range list.Items {
		if strings.HasPrefix(ev.InvolvedObject.Name, prefix) {
			out = append(out, ev.Message)
		}
	}
	return out, nil
}

// TestDRAScaleUpStopsAtGPUTotal: 5 pods each claim one GPU of a DRA driver
// whose nodes publish 2 devices each (no extended GPU resource, no GPU
// label: the devices count under the driver's name); --gpu-total=<driver>:0:4
// lets the group grow to 2 nodes (4 GPUs) and no further, once the nodes
// run and publish their slices too: 4 pods run, the fifth waits, and the
// autoscaler says the GPU limit is why. The scale-up is counted with the
// driver in dra_drivers (folded into custom.driver, not one of upstream's
// named drivers). A sixth pod claiming 8 devices on one node, which no
// group offers, is told so, with the device class named.
func TestDRAScaleUpStopsAtGPUTotal(t *testing.T) {
	e := framework.New(t)
	gpu, plain, driver, path := itest.DraGroups(e, 2)
	itest.DumpPods(e)
	createGPUDeployment(e, "train", driver, 5)
	createDevicesDeployment(e, "big", driver, 1, 8)

	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--expander=least-waste", "--gpu-total="+driver+":0:4")...)
	waitRunningWithClaims(e, 4, 120*time.Second, "4 pods Running with their claims allocated")
	e.Eventually(60*time.Second, "the autoscaler names --gpu-total for the fifth pod", func(context.Context) (bool, error) {
		return p.Log.Contains("GPU limit (--gpu-total) reached"), nil
	})
	e.Eventually(60*time.Second, "the 8-device pod's NotTriggerScaleUp names the class", func(ctx context.Context) (bool, error) {
		msgs, err := notTriggerScaleUp(ctx, e, "big-")
		for _, m := range msgs {
			if strings.Contains(m, "8 devices of class "+driver) {
				return true, nil
			}
		}
		return false, err
	})
	// Several more loops (scan interval 1s), with the 2 nodes registered and
	// their slices published, must not add a node.
	time.Sleep(5 * time.Second)
	if got := itest.NodesPerPool(e); got[gpu] != 2 || got[plain] != 0 {
		t.Errorf("nodes per group = %v, want %s:2 (4 GPUs) and no %s node", got, gpu, plain)
	}
	if n, err := notRunningPods(e.Context(), e); err != nil || n != 2 {
		t.Errorf("%d pods not running (err %v), want 2 (the fifth GPU pod and the 8-device pod)", n, err)
	}
	_, body, err := p.Get(e.Context(), "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if want := `cluster_autoscaler_scaled_up_nodes_total{dra_drivers="custom.driver",gpu_name="",gpu_resource_name=""} 2`; !strings.Contains(body, want) {
		t.Errorf("metrics lack %s", want)
	}
}
