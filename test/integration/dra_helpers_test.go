package integration

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// kwokGroup is one node group of a kwok provider config for the DRA
// tests: nodes of cpu and memory whose driver publishes a device per
// entry of models (gpu-<i>, with the attribute model when the entry is not
// empty), or no device when driver is empty.
type kwokGroup struct {
	name        string
	maxSize     int    // 10 when 0
	cpu, memory string // "8" and 32Gi when empty
	driver      string
	models      []string
	fromNodes   bool
	faults      string // the group's faults, inline YAML: "{resourceSliceDelay: 20s}"
}

// devicesGroup is a kwok group of 8-CPU nodes publishing n devices of
// driver without attributes.
func devicesGroup(name, driver string, n int) kwokGroup {
	return kwokGroup{name: name, driver: driver, models: repeat("", n)}
}

// yaml is the group's entry of nodeGroups, labelled with the test's
// namespace and pool=<name>.
func (g kwokGroup) yaml(e *framework.Env) string {
	var b strings.Builder
	fmt.Fprintf(&b, "- name: %s\n  minSize: 0\n  maxSize: %d\n  template:\n", g.name, cmp.Or(g.maxSize, 10))
	if g.fromNodes {
		b.WriteString("    fromNodes: true\n")
	}
	fmt.Fprintf(&b, "    labels: {%s: %s, pool: %s}\n", framework.TestNamespaceLabel, e.Namespace, g.name)
	fmt.Fprintf(&b, "    capacity: {cpu: %q, memory: %s, pods: \"110\"}\n", cmp.Or(g.cpu, "8"), cmp.Or(g.memory, "32Gi"))
	if g.driver != "" {
		fmt.Fprintf(&b, "    devices:\n    - driver: %s\n      devices:\n", g.driver)
		for i, m := range g.models {
			fmt.Fprintf(&b, "      - name: gpu-%d\n", i)
			if m != "" {
				fmt.Fprintf(&b, "        attributes: {model: {string: %s}}\n", m)
			}
		}
	}
	if g.faults != "" {
		fmt.Fprintf(&b, "  faults: %s\n", g.faults)
	}
	return b.String()
}

// writeKwokGroups writes a kwok provider config of groups and returns its
// path.
func writeKwokGroups(e *framework.Env, groups ...kwokGroup) string {
	e.T.Helper()
	var b strings.Builder
	b.WriteString("nodeGroups:\n")
	for _, g := range groups {
		b.WriteString(g.yaml(e))
	}
	return writeKwokConfig(e, b.String())
}

// draGroups is the setup most DRA tests share: a group "gpu-..." whose
// nodes (8 CPUs) publish perNode devices (model a100) of a driver of its
// own, a group "plain-..." of bigger nodes (32 CPUs) without devices, and
// a DeviceClass named after the driver that selects its devices. It
// returns the groups' names, the driver (and class) and the config's path.
func draGroups(e *framework.Env, perNode int) (gpu, plain, driver, path string) {
	e.T.Helper()
	gpu, plain = framework.UniqueName("gpu"), framework.UniqueName("plain")
	driver = gpu + ".example.com"
	path = writeKwokGroups(e, kwokGroup{name: gpu, driver: driver, models: repeat("a100", perNode)},
		kwokGroup{name: plain, cpu: "32", memory: "128Gi"})
	createDeviceClass(e, driver, driver)
	return gpu, plain, driver, path
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// waitRunningWithClaims waits, up to timeout, until n pods of the test run
// and n of its ResourceClaims are allocated; what describes it.
func waitRunningWithClaims(e *framework.Env, n int, timeout time.Duration, what string) {
	e.T.Helper()
	e.Eventually(timeout, what, func(ctx context.Context) (bool, error) {
		if ok, err := allRunning(ctx, e, n); !ok || err != nil {
			return false, err
		}
		allocated, err := allocatedClaims(ctx, e)
		return allocated == n, err
	})
}
