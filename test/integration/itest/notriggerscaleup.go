package itest

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// PodEventMessages lists the messages of the events of reason on pod name.
func PodEventMessages(ctx context.Context, e *framework.Env, name, reason string) ([]string, error) {
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

// ThreeRefusingGroups writes a kwok config of three groups that each refuse
// a 1-CPU pod for their own cause: tainted has a taint the pod does not
// tolerate, full a max size of 0, refused runs out of capacity at its
// first increase (and is then backed off).
func ThreeRefusingGroups(e *framework.Env) (path, tainted, full, refused string) {
	tainted, full, refused = framework.UniqueName("tainted"), framework.UniqueName("full"), framework.UniqueName("refused")
	return WriteKwokConfig(e, fmt.Sprintf(`nodeGroups:
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
