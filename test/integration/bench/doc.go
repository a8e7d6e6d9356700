// Package bench tests, against the real local control plane and binary, benchmarks (scale, burst,
// shrink, soak, ProvisioningRequests); go test -bench runs them (some on a control plane of their
// own). Without -test.bench their TestMain builds nothing and starts no control plane.
package bench
