// Package bench tests, against the real local control plane and binary,
// benchmarks (scale, burst, shrink, soak, ProvisioningRequests); go test -bench runs them, each on its own cluster.
package bench
