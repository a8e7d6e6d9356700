// Package processor runs ProvisioningRequests through the autoscaler's loop:
// it builds each request's pods from its PodTemplates (one equivalence group
// per PodSet), sets aside the pods that consume a live request, books the
// capacity of provisioned requests, answers check-capacity requests, scales
// up best-effort-atomic ones all-or-nothing (watching and rolling back the
// instances of an attempt), and writes the conditions, events and metrics
// of the whole lifecycle. The attempts in flight, the rollbacks still to
// finish and the nodes of provisioned atomic requests are written to a
// RecordStore (before an attempt's increases, and after every loop that
// changed them) and read back by the next leader's first loop, which then
// finishes or rolls back what the last one left; a rollback deletes only
// instances the leader that made the increase attributed to it, never a
// node running pods other than the request's, and a record whose request
// is gone or that is too old rolls back nothing. It decides against a
// scale-up session (the Capacity interface) and must not import core/ or a
// cloud provider.
package processor
