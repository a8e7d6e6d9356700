// Package itest holds what the integration test packages under
// test/integration share: their TestMain (Main: the cluster-autoscaler binary
// built once, then the package's own control plane from test/framework),
// running the binary (StartAutoscaler), and the builders and waits more than
// one package uses. Each package of tests there has its own control plane,
// so go test runs them side by side.
package itest
