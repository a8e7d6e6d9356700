// Package aws is the AWS cloud provider (--cloud-provider=aws): node groups
// are EC2 Auto Scaling groups, named with --nodes=<min>:<max>:<asg-name> or
// found by their tags with --node-group-auto-discovery=asg:tag=<k>[=<v>],...
// It talks to AWS only through the AWS SDK for Go v2 (its default
// credential chain, region and endpoint resolution, adaptive retryer), so
// tests point it at a fake of the AWS APIs with AWS_ENDPOINT_URL_AUTO_SCALING,
// AWS_ENDPOINT_URL_EC2 and AWS_ENDPOINT_URL_EKS and no test-only code path.
//
// What it owns: the translation of Auto Scaling group and EC2 descriptions
// into node groups, instances (with placeholders for capacity AWS has not
// launched yet, failed when the group's latest scaling activity failed),
// template nodes for scale from zero (instance type facts, launch templates
// and configurations, mixed-instances policies, the labels and taints of
// EKS managed node groups read with DescribeNodegroup (eks.go),
// node-template tags) and
// per-group options from tags. It deletes instances only by their id, with
// TerminateInstanceInAutoScalingGroup, and lowers a desired capacity only
// where no instance stands behind it, with the instances protected from
// scale-in for the length of the call (cancel.go). It keeps the groups'
// descriptions between loops and reads a group again only when it may
// have changed (cache.go), but every deletion checks its nodes against a
// fresh description. The --cloud-config file is upstream's, of which the
// endpoint overrides act (cloudconfig.go). A node group tells whether an
// instance was launched otherwise than the group would launch it now (its
// launch template or version, launch configuration, or a mixed-instances
// type no longer allowed) from the kept descriptions and the version
// numbers of $Latest / $Default templates (drift.go). After a Spot
// interruption warning it avoids the (group, type, zone) Spot offering for
// --aws-interrupted-capacity-avoid-time, and names to the cluster state
// (cloudprovider.CapacityAvoider, code SpotInterrupted) a group all of
// whose Spot offerings are avoided (avoidance.go). A group whose launch
// template names a Capacity Reservation or Capacity Block is bounded by
// the instances left in it, labelled, and tells the price expander how
// many of its next nodes are already paid for (reservations.go).
//
// It must not import the autoscaler's core packages (scaleup, clusterstate,
// processors...): only cloudprovider and config.
package aws
