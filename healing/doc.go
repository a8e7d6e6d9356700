// Package healing names node healing (--node-healing-enabled) as it was
// before the disruption engine: healing is now the Unhealthy reason of
// package disruption, which owns the whole procedure (cordon, replacement
// first, drain through the Eviction API, deletion by name, fencing, the
// heal_start and heal_end hooks, the state ConfigMap
// cluster-autoscaler-healing). This package keeps the names callers and
// tests used, as aliases of disruption's.
package healing
