package itest

import (
	"fmt"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// OneGroupConfig is a kwok config of one 4-CPU group with the given faults.
func OneGroupConfig(e *framework.Env, name string, maxSize int, faults string) string {
	return WriteKwokConfig(e, fmt.Sprintf(`
nodeGroups:
- name: %[1]s
  maxSize: %[2]d
  template:
    labels: {%[3]s: %[4]s, pool: %[1]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {%[5]s}
`, name, maxSize, framework.TestNamespaceLabel, e.Namespace, faults))
}
