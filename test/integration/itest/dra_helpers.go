package itest

import (
	"cmp"
	"fmt"
	"strings"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// KwokGroup is one node group of a kwok provider config for the DRA
// tests: nodes of cpu and memory whose driver publishes a device per
// entry of models (gpu-<i>, with the attribute model when the entry is not
// empty), or no device when driver is empty.
type KwokGroup struct {
	Name        string
	MaxSize     int    // 10 when 0
	CPU, Memory string // "8" and 32Gi when empty
	Driver      string
	Models      []string
	FromNodes   bool
	Faults      string // the group's faults, inline YAML: "{resourceSliceDelay: 20s}"
}

// yaml is the group's entry of nodeGroups, labelled with the test's
// namespace and pool=<name>.
func (g KwokGroup) yaml(e *framework.Env) string {
	var b strings.Builder
	fmt.Fprintf(&b, "- name: %s\n  minSize: 0\n  maxSize: %d\n  template:\n", g.Name, cmp.Or(g.MaxSize, 10))
	if g.FromNodes {
		b.WriteString("    fromNodes: true\n")
	}
	fmt.Fprintf(&b, "    labels: {%s: %s, pool: %s}\n", framework.TestNamespaceLabel, e.Namespace, g.Name)
	fmt.Fprintf(&b, "    capacity: {cpu: %q, memory: %s, pods: \"110\"}\n", cmp.Or(g.CPU, "8"), cmp.Or(g.Memory, "32Gi"))
	if g.Driver != "" {
		fmt.Fprintf(&b, "    devices:\n    - driver: %s\n      devices:\n", g.Driver)
		for i, m := range g.Models {
			fmt.Fprintf(&b, "      - name: gpu-%d\n", i)
			if m != "" {
				fmt.Fprintf(&b, "        attributes: {model: {string: %s}}\n", m)
			}
		}
	}
	if g.Faults != "" {
		fmt.Fprintf(&b, "  faults: %s\n", g.Faults)
	}
	return b.String()
}

// WriteKwokGroups writes a kwok provider config of groups and returns its
// path.
func WriteKwokGroups(e *framework.Env, groups ...KwokGroup) string {
	e.T.Helper()
	var b strings.Builder
	b.WriteString("nodeGroups:\n")
	for _, g := range groups {
		b.WriteString(g.yaml(e))
	}
	return WriteKwokConfig(e, b.String())
}

// DraGroups is the setup most DRA tests share: a group "gpu-..." whose
// nodes (8 CPUs) publish perNode devices (model a100) of a driver of its
// own, a group "plain-..." of bigger nodes (32 CPUs) without devices, and
// a DeviceClass named after the driver that selects its devices. It
// returns the groups' names, the driver (and class) and the config's path.
func DraGroups(e *framework.Env, perNode int) (gpu, plain, driver, path string) {
	e.T.Helper()
	gpu, plain = framework.UniqueName("gpu"), framework.UniqueName("plain")
	driver = gpu + ".example.com"
	path = WriteKwokGroups(e, KwokGroup{Name: gpu, Driver: driver, Models: Repeat("a100", perNode)},
		KwokGroup{Name: plain, CPU: "32", Memory: "128Gi"})
	CreateDeviceClass(e, driver, driver)
	return gpu, plain, driver, path
}

// Repeat returns n copies of s.
func Repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}
