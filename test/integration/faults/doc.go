// Package faults tests, against the real local control plane and binary, faults and failover: API
// server restarts, throttling, deletions under faults, a second replica taking over. They are slow
// (minutes in all): they run only with $INTEGRATION_SLOW set (make test-slow), and their TestMain
// starts no control plane without it.
package faults
