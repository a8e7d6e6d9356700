// Package provreq holds the vocabulary of ProvisioningRequests that the
// autoscaling logic shares: provisioning class names (and their older
// aliases), condition types and reasons, pod annotation keys, parameter keys,
// and small pure helpers over them (class normalisation, condition find/set,
// consumed-request lookup on pods, parameter parsing); the consume keys and
// lookup are podutil's, repeated here. The API types live in
// provreq/apis/..., the CRD manifest in provreq/crd, the typed client,
// informer and lister in provreq/client. This package does no I/O: it must
// not import provreq/client, client-go, core/ or cloud providers.
package provreq
