// Package template turns a node group's template NodeInfo into the nodes a
// simulation adds: each clone gets its own name, hostname label and pod
// identities, so the scheduler's per-node and per-hostname rules see distinct
// nodes. It must not import k8s.io/kubernetes.
package template

// TemplateNodeLabel marks simulated template nodes, as upstream does, so that
// CSI drivers and plugins can tell them apart from real nodes.
const TemplateNodeLabel = "cluster-autoscaler.kubernetes.io/template-node"
