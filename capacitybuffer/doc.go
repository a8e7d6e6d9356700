// Package capacitybuffer holds the vocabulary of CapacityBuffers that the
// buffer controller and the loop's pod injection share: the provisioning
// strategy, condition types and reasons, the mark of the pods injected for a
// buffer, and small pure helpers over them: spec validation, the number of
// chunks a buffer asks for (replicas, percentage, limits), and the pods built
// from a buffer's template. The API types live in capacitybuffer/apis/...,
// the CRD manifest in capacitybuffer/crd, the typed client, informer and
// lister in capacitybuffer/client, the controller in
// capacitybuffer/controller. This package does no I/O: it must not import
// capacitybuffer/client, client-go, core/ or cloud providers.
package capacitybuffer
