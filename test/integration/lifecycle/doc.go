// Package lifecycle tests, against the real local control plane and binary, the process: health and
// metrics endpoints, leader election, flags, events and the Prometheus rules.
package lifecycle
