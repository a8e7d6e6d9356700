// Package processor runs ProvisioningRequests through the autoscaler's loop:
// it builds each request's pods from its PodTemplates (one equivalence group
// per PodSet), sets aside the pods that consume a live request, books the
// capacity of provisioned requests, answers check-capacity requests, scales
// up best-effort-atomic ones all-or-nothing (watching and rolling back the
// instances of an attempt), and writes the conditions, events and metrics
// of the whole lifecycle. It decides against a scale-up session (the
// Capacity interface) and must not import core/ or a cloud provider.
package processor
