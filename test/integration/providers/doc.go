// Package providers tests, against the real local control plane and binary, the cloud providers
// against their fakes: AWS, Cluster API, external gRPC and kwok.
package providers
