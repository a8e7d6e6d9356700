// Package awsfake is a stateful fake of the AWS Auto Scaling and EC2 APIs for
// tests: an HTTP server on 127.0.0.1 that speaks the AWS query protocol
// (form-encoded POST bodies carrying Action and Version, XML answers, AWS's
// error envelopes and codes, NextToken pagination), written from the AWS API
// reference. Point the AWS SDK at it with its standard endpoint variables
// AWS_ENDPOINT_URL_AUTO_SCALING and AWS_ENDPOINT_URL_EC2 (Server.Env gives
// them, with fake credentials, for a child process); one server answers both
// services, told apart by the action name.
//
// The fake holds instance types, subnets, launch templates and launch
// configurations (added by the test) and Auto Scaling groups. It moves each
// group's instances towards its desired capacity on its own: new instances
// are Pending, then InService after the start delay; each launch is recorded
// as a scaling activity, and a launch made to fail (FailLaunches) is recorded
// as a failed activity whose status message carries the error code, leaving
// the desired capacity as it was. Fault knobs throttle a share of calls with
// the codes the SDK's retryer treats as throttling, fail launches and delay
// instance start.
//
// Requests must carry an AWS Signature Version 4 Authorization header whose
// credential scope names the server's region and the service; the signature
// itself is not verified.
//
// PlayKubelet plays the kubelet of the fake's instances against a Kubernetes
// API server: a kwok-managed Node per InService instance, removed when the
// instance is gone.
//
// The package knows nothing of any cloud provider implementation; it must not
// be imported by anything outside test/.
package awsfake
