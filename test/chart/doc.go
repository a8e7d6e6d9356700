// Package chart tests the Helm chart in charts/cluster-autoscaler: its CRD is
// the one provreq/crd generates, it renders (with the helm binary pinned by
// hack/tools/helm) to the objects its values promise, and the RBAC it renders
// lets the real binary do its work against the real local control plane.
// Its alert rules pass promtool (check rules, and the unit tests in
// testdata/alerts_test.yaml) and its dashboard is rendered as the sidecar
// expects; test/integration runs both against a real Prometheus.
// The package holds tests only.
package chart
