package integration

import (
	"context"
	"fmt"
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
