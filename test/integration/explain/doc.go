// Package explain tests, against the real local control plane and binary, the explainer: /explainz,
// the explain subcommand (live, what-if, offline) and /snapshotz.
package explain
