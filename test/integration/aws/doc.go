// Package aws tests, against the real local control plane and binary, the AWS provider through the real AWS SDK
// against test/awsfake (Auto Scaling, EC2 and EKS as AWS answers them): scale-up by auto-discovery and from zero,
// managed node groups and instance requirements at zero, scale-down by instance ID, out-of-capacity back-off,
// throttling and atomic ProvisioningRequests.
package aws
