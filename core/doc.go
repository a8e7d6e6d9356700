// Package core owns the autoscaler's loop: Autoscaler.RunOnce as a list of
// named steps, the Runner that triggers it, and the liveness it reports on
// /health-check. Decisions live in the step packages it calls; what varies
// between builds (which pods reach the scale-up, ProvisioningRequests,
// events, repairs) is the processors' (package processors), which core calls
// in order and knows nothing more of. core must not import a concrete cloud
// provider, package main, provreq, processors/provreqs, capacitybuffer or
// processors/capacitybuffers (.golangci.yaml, rule
// core-knows-no-request-or-provider).
package core
