// Package metrics owns every Prometheus series the autoscaler exports, under
// the cluster_autoscaler_ namespace and with upstream's names, so existing
// dashboards keep working. Series are registered on an injected Registerer;
// there is no global registry. It must not import core/ or cloud providers.
package metrics
