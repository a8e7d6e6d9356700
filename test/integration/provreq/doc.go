// Package provreq tests, against the real local control plane and binary, ProvisioningRequests (check-
// capacity, atomic, restored records) and CapacityBuffers.
package provreq
