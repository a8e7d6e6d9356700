// Package providers tests, against the real local control plane and binary, the cloud providers
// against their fakes: external gRPC and kwok (Cluster API: test/integration/clusterapi; AWS:
// test/integration/aws).
package providers
