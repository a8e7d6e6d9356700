// Package cloudprovider defines what the autoscaler needs from a cloud: the
// CloudProvider, NodeGroup and Instance interfaces with upstream's method set
// and semantics (every method but Name and Id takes a context), the errors
// that classify their failures, the cluster-wide ResourceLimiter, and an
// explicit Registry from which --cloud-provider picks an implementation.
// Implementations live in sub-packages (fake/, kwok/, externalgrpc/,
// clusterapi/, aws/); only the composition names one. This
// package must not import k8s.io/kubernetes or any implementation.
package cloudprovider
