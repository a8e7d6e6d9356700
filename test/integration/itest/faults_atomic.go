package itest

import (
	"strings"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// PendingInstances lists the instances of the groups that the kwok
// provider holds without a Node (being created, failed or never listed).
func PendingInstances(e *framework.Env, groups []string) []string {
	state := KwokInstances(e)
	var out []string
	for _, g := range groups {
		for _, part := range strings.Split(state, `"name":"`)[1:] {
			name, _, _ := strings.Cut(part, `"`)
			if strings.HasPrefix(name, g+"-") {
				out = append(out, name)
			}
		}
	}
	return out
}
