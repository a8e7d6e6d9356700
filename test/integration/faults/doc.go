// Package faults tests, against the real local control plane and binary,
// faults and failover: API server restarts, throttling, deletions under faults, a second replica taking over.
package faults
