// Package providers tests, against the real local control plane and binary, the cloud providers
// against their fakes: Cluster API, external gRPC and kwok (AWS: test/integration/aws).
package providers
