// Package explain keeps the reasons of the autoscaler's last loop, for the
// explainer: for every pending pod group the loop considered, each node
// group's verdict (it fits, with the nodes it needs and whether the expander
// chose it, or the first refusal with its cause and numbers), and for every
// node its scale-down verdict (unneeded since when and for how much longer,
// or what keeps it) and its disruption verdicts (for each reason that is on:
// whether it holds, the saving, the replacement, and the protection or budget
// that holds the node back). It renders them for a person (a table) or a tool
// (JSON), and serves them on /explainz.
//
// The record is bounded: only the last complete loop is kept, with at most
// MaxNodeGroupVerdicts verdicts per pod group and MaxPodGroups pod groups.
//
// explain is a leaf: it imports only the Kubernetes API types, the standard
// library and podutil (which request a pod consumes), so that the loop's
// packages (scaleup, scaledown, core) can feed it; it must not import any
// other package of this module (.golangci.yaml, rule explain-is-a-leaf).
// Package builder wires it. Its subpackages: readonly holds the read-only
// clients of the `cluster-autoscaler explain` command, whatif its
// manifests, offline a /snapshotz dump's provider and objects, and command
// the command itself (which imports the builder; nothing imports it but
// package main).
package explain
