// Package client talks to the API server about CapacityBuffers: a typed
// client for autoscaling.x-k8s.io/v1beta1 (get, list, watch, create, update,
// delete, and a server-side-apply status write that leaves the conditions of
// other writers alone), a shared informer indexed by namespace, and a lister
// over its cache. It is built on client-go's generic pieces (gentype,
// listers), as provreq/client is. It must not import the autoscaling logic
// (core/, scaleup/, ...).
package client
