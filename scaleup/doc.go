// Package scaleup decides and executes scale-ups: it places pending pods on
// existing and upcoming capacity first, estimates for every eligible node
// group how many template nodes the rest need, lets the expander chain
// choose, increases the chosen group, and repeats over further groups in the
// same loop while pods remain. Decisions are made on the simulator's snapshot;
// the cloud calls are the reads of node group state, IncreaseSize and
// AtomicIncreaseSize, and, when an all-or-nothing scale-up is rolled back,
// the deletion of its instances by name (ForceDeleteNodes, else DeleteNodes)
// and DecreaseTargetSize for what it asked for and never got.
package scaleup
