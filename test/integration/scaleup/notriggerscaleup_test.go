package scaleup

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// TestNotTriggerScaleUpNamesEachCause: three pods no group can take (a
// nodeSelector no template has, 40 CPUs, 200Gi) are each told their own
// cause, counted over the two groups, as upstream words it (issue 29: all
// three were told "2 it wouldn't fit if a new node is added").
func TestNotTriggerScaleUpNamesEachCause(t *testing.T) {
	e := framework.New(t)
	path, _, _ := itest.ScaleUpConfig(e)
	itest.DumpPods(e)
	// The namespace's selector keeps nodes of other tests out; both
	// templates carry it.
	pods := map[string]*framework.PodBuilder{
		"selector": framework.MakePod(e.Namespace, "selector").Req("1", "1Gi").NodeSelector("pool", "missing"),
		"cpu":      framework.MakePod(e.Namespace, "cpu").Req("40", "1Gi").NodeSelector(framework.TestNamespaceLabel, e.Namespace),
		"memory":   framework.MakePod(e.Namespace, "memory").Req("1", "200Gi").NodeSelector(framework.TestNamespaceLabel, e.Namespace),
	}
	for _, b := range pods {
		if _, err := e.Client.CoreV1().Pods(e.Namespace).Create(e.Context(), b.Obj(), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]string{
		"selector": "pod didn't trigger scale-up: 2 node(s) didn't match Pod's node affinity/selector",
		"cpu":      "pod didn't trigger scale-up: 2 Insufficient cpu",
		"memory":   "pod didn't trigger scale-up: 2 Insufficient memory",
	}
	itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path)...)
	for name, msg := range want {
		var got []string
		e.Eventually(60*time.Second, fmt.Sprintf("NotTriggerScaleUp on %s: %q", name, msg), func(ctx context.Context) (bool, error) {
			var err error
			got, err = itest.PodEventMessages(ctx, e, name, "NotTriggerScaleUp")
			return len(got) > 0, err
		})
		if len(got) != 1 || got[0] != msg {
			t.Errorf("NotTriggerScaleUp on %s: %q, want only %q", name, strings.Join(got, " | "), msg)
		}
	}
	if got := itest.NodesPerPool(e); len(got) != 0 {
		t.Errorf("nodes added: %v, want none", got)
	}
}

// TestNotTriggerScaleUpNamesTaintMaxSizeAndBackoff: a pod that three groups
// refuse for three causes (a taint it does not tolerate, the max size, a
// back-off after the cloud ran out of capacity) is told each, the taint
// and the back-off's error code named.
func TestNotTriggerScaleUpNamesTaintMaxSizeAndBackoff(t *testing.T) {
	e := framework.New(t)
	path, _, _, _ := itest.ThreeRefusingGroups(e)
	itest.DumpPods(e)
	itest.CreatePods(e, "web", 1, "1", map[string]string{framework.TestNamespaceLabel: e.Namespace})
	// The first loop's event says "scale-up execution failed" for the group
	// it has just tried; client-go's spam filter would hold back the next
	// message on the same pod and reason for five minutes.
	itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--record-duplicated-events")...)
	want := "pod didn't trigger scale-up: 1 in backoff after failed scale-up (STOCKOUT), 1 max node group size reached, " +
		"1 node(s) had untolerated taint(s) (dedicated=batch:NoSchedule)"
	var got []string
	defer func() {
		if t.Failed() {
			t.Logf("NotTriggerScaleUp messages on web-0: %q", got)
		}
	}()
	e.Eventually(60*time.Second, "NotTriggerScaleUp: "+want, func(ctx context.Context) (bool, error) {
		msgs, err := itest.PodEventMessages(ctx, e, "web-0", "NotTriggerScaleUp")
		if err != nil {
			return false, nil // the next poll asks again
		}
		got = msgs
		return slices.Contains(got, want), nil
	})
	if got := itest.NodesPerPool(e); len(got) != 0 {
		t.Errorf("nodes added: %v, want none", got)
	}
}
