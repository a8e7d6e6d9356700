package itest

import (
	"fmt"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// PriorityConfigMap is the priority expander's ConfigMap with the given priorities.
func PriorityConfigMap(e *framework.Env, priorities string) *apiv1.ConfigMap {
	return &apiv1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-autoscaler-priority-expander", Namespace: e.Namespace},
		Data:       map[string]string{"priorities": priorities},
	}
}

// OutOfCapacityGroups writes a kwok config of two like groups, preferred
// (out of capacity after one instance) and fallback, and the priority
// expander's ConfigMap that prefers the first; it returns the config's path
// and the group names.
func OutOfCapacityGroups(e *framework.Env) (path, preferred, fallback string) {
	e.T.Helper()
	preferred, fallback = framework.UniqueName("preferred"), framework.UniqueName("fallback")
	cfg := fmt.Sprintf(`
nodeGroups:
- name: %[1]s
  maxSize: 10
  template:
    labels: {%[3]s: %[4]s, pool: %[1]s, shape: standard}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 1s, outOfCapacityAfter: 1}
- name: %[2]s
  maxSize: 10
  template:
    labels: {%[3]s: %[4]s, pool: %[2]s, shape: standard}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 1s}
`, preferred, fallback, framework.TestNamespaceLabel, e.Namespace)
	path = WriteKwokConfig(e, cfg)
	priorities := PriorityConfigMap(e, fmt.Sprintf("20:\n  - ^%s$\n10:\n  - .*\n", preferred))
	if _, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Create(e.Context(), priorities, metav1.CreateOptions{}); err != nil {
		e.T.Fatal(err)
	}
	return path, preferred, fallback
}
