// Command cluster-autoscaler is the project's only composition root: it wires
// the other packages together and implements nothing of its own. It parses the
// upstream-compatible flags into config.Options (flags.go, logging.go,
// healing.go for the healing flags), starts the clients, metrics and HTTP
// server (wire.go, http.go) and runs the loop under leader election
// (leader.go) until SIGTERM (main.go). runAutoscaler (run.go) reads as the
// list of subsystems it wires, each in a short step or file of its own:
// scale-up and capacity quotas (scaleup.go), scale-down (scaledown.go),
// ProvisioningRequests (provreqs.go), CapacityBuffers (buffers.go), node
// healing (healing.go), the loop's processors (processors.go), events
// (events.go) and the triggers that start a loop early (triggers.go). The
// informers' cache transform lives in informercache/, the heap governor in
// heapgovernor/, the Lease release in leaderlease/. No other package reads
// flags or the environment.
package main
