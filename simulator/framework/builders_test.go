package framework

import "k8s.io/autoscaler/cluster-autoscaler/internal/testbuild"

// makeNode is a Ready node of cpu, 16Gi and 110 pods.
func makeNode(name, cpu string) *testbuild.NodeBuilder {
	return testbuild.Node(name).Resources(cpu, "16Gi", "110")
}

// makePod is a pod in "default" requesting cpu.
func makePod(name, cpu string) *testbuild.PodBuilder { return testbuild.Pod(name).Req(cpu, "") }
