// Package simulator is the autoscaler's what-if engine, in three packages:
// framework/ runs the real scheduler framework against a forkable cluster
// snapshot and answers "does this pod fit that node"; drain/ holds the
// drainability rules scale-down applies to a node's pods; template/ makes
// the template nodes a simulation adds for a node group. This package itself
// holds only this comment.
package simulator
