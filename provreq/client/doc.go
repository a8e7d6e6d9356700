// Package client talks to the API server about ProvisioningRequests: a typed
// client for autoscaling.x-k8s.io/v1 (get, list, watch, create, update,
// delete, and a server-side-apply status write that leaves other writers'
// conditions alone), a shared informer indexed by namespace, and a lister
// over its cache. It is built on client-go's generic pieces (gentype,
// listers), not on generated clientsets. It must not import the autoscaling
// logic (core/, scaleup/, ...).
package client
