// Package externalgrpc is the cloud provider that delegates to a server
// speaking the external gRPC cloud provider protocol (package protos):
// --cloud-provider=externalgrpc with --cloud-config naming a YAML file that
// gives the server's address, optional mTLS files and a per-call timeout.
//
// It owns the client side of the protocol only: the translation between the
// protocol's messages and the cloudprovider interfaces, the caches the
// protocol allows (node groups and the group of each node until the next
// Refresh; the GPU label and types for good; a group's template for the
// group object's life; each group's target size and instances, read with the
// groups, for the loop's first caller only), and the validation of every
// answer. An answer that makes no
// sense (a negative size, duplicate instance ids, a template that does not
// decode, a group under two names) is logged and the group is left out of
// the loop; it never leads to a deletion. It must not import any other
// provider, nor anything of the autoscaler above package cloudprovider.
package externalgrpc
