// Package taints names the taint keys the autoscaler gives a meaning to,
// for every package that reads or writes them (templates, readiness,
// metrics): the key prefixes that mark a taint as a startup, ignored or
// status taint. It holds constants only and imports nothing of this module,
// so that any package may import it.
package taints
