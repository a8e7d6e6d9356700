// Package burst tests, against the real local control plane and binary, pending-pod bursts and the
// proactive scale-up of ReplicaSets.
package burst
