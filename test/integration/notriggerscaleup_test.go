package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// podEventMessages lists the messages of the events of reason on pod name.
func podEventMessages(ctx context.Context, e *framework.Env, name, reason string) ([]string, error) {
	events, err := e.Client.CoreV1().Events(e.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ev := range events.Items {
		if ev.Reason == reason && ev.InvolvedObject.Kind == "Pod" && ev.InvolvedObject.Name == name {
			out = append(out, ev.Message)
		}
	}
	return out, nil
}

// TestNotTriggerScaleUpNamesEachCause: three pods no group can take (a
// nodeSelector no template has, 40 CPUs, 200Gi) are each told their own
// cause, counted over the two groups, as upstream words it (issue 29: all
// three were told "2 it wouldn't fit if a new node is added").
func TestNotTriggerScaleUpNamesEachCause(t *testing.T) {
	e := framework.New(t)
	path, _, _ := scaleUpConfig(e)
	dumpPods(e)
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
	startAutoscaler(t, "autoscaler", scaleUpArgs(e, path)...)
	for name, msg := range want {
		var got []string
		e.Eventually(60*time.Second, fmt.Sprintf("NotTriggerScaleUp on %s: %q", name, msg), func(ctx context.Context) (bool, error) {
			var err error
			got, err = podEventMessages(ctx, e, name, "NotTriggerScaleUp")
			return len(got) > 0, err
		})
		if len(got) != 1 || got[0] != msg {
			t.Errorf("NotTriggerScaleUp on %s: %q, want only %q", name, strings.Join(got, " | "), msg)
		}
	}
	if got := nodesPerPool(e); len(got) != 0 {
		t.Errorf("nodes added: %v, want none", got)
	}
}

// TestNotTriggerScaleUpNamesTaintMaxSizeAndBackoff: a pod that three groups
// refuse for three causes (a taint it does not tolerate, the max size, a
// back-off after the cloud ran out of capacity) is told each, the taint
// and the back-off's error code named.
func TestNotTriggerScaleUpNamesTaintMaxSizeAndBackoff(t *testing.T) {
	e := framework.New(t)
	path, _, _, _ := threeRefusingGroups(e)
	dumpPods(e)
	createPods(e, "web", 1, "1", map[string]string{framework.TestNamespaceLabel: e.Namespace})
	// The first loop's event says "scale-up execution failed" for the group
	// it has just tried; client-go's spam filter would hold back the next
	// message on the same pod and reason for five minutes.
	startAutoscaler(t, "autoscaler", scaleUpArgs(e, path, "--record-duplicated-events")...)
	want := "pod didn't trigger scale-up: 1 in backoff after failed scale-up (STOCKOUT), 1 max node group size reached, " +
		"1 node(s) had untolerated taint(s) (dedicated=batch:NoSchedule)"
	var got []string
	defer func() {
		if t.Failed() {
			t.Logf("NotTriggerScaleUp messages on web-0: %q", got)
		}
	}()
	e.Eventually(60*time.Second, "NotTriggerScaleUp: "+want, func(ctx context.Context) (bool, error) {
		msgs, err := podEventMessages(ctx, e, "web-0", "NotTriggerScaleUp")
		if err != nil {
			return false, nil // the next poll asks again
		}
		got = msgs
		return slices.Contains(got, want), nil
	})
	if got := nodesPerPool(e); len(got) != 0 {
		t.Errorf("nodes added: %v, want none", got)
	}
}

// threeRefusingGroups writes a kwok config of three groups that each refuse
// a 1-CPU pod for their own cause: tainted has a taint the pod does not
// tolerate, full a max size of 0, refused runs out of capacity at its
// first increase (and is then backed off).
func threeRefusingGroups(e *framework.Env) (path, tainted, full, refused string) {
	tainted, full, refused = framework.UniqueName("tainted"), framework.UniqueName("full"), framework.UniqueName("refused")
	return writeKwokConfig(e, fmt.Sprintf(`nodeGroups:
- name: %[1]s
  maxSize: 10
  template:
    labels: {%[4]s: %[5]s, pool: %[1]s}
    taints: [{key: dedicated, value: batch, effect: NoSchedule}]
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
- name: %[2]s
  maxSize: 0
  template:
    labels: {%[4]s: %[5]s, pool: %[2]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
- name: %[3]s
  maxSize: 3
  options: {zeroOrMaxNodeScaling: true}
  template:
    labels: {%[4]s: %[5]s, pool: %[3]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {outOfCapacityAfter: 1}
`, tainted, full, refused, framework.TestNamespaceLabel, e.Namespace)), tainted, full, refused
}
