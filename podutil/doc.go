// Package podutil reads what the autoscaler's packages on every floor need
// off a pod's metadata: today the annotation by which a pod consumes a
// ProvisioningRequest's capacity, which the loop's scale-up (rollbacks),
// the explainer and the ProvisioningRequest processors all read. It holds
// keys and pure lookups, imports nothing of this module, and does no I/O.
package podutil
