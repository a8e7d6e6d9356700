// Package simulator is the autoscaler's what-if engine: the forkable cluster
// snapshot and the scheduler framework that answers "does this pod fit that
// node" (framework/), and, to come, drainability rules (drain/) and template
// nodes (template/).
package simulator
