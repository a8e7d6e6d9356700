// Package capacityquota reads CapacityQuota objects
// (autoscaling.x-k8s.io/v1beta1, cluster-scoped; --capacity-quotas-enabled):
// limits on the summed resources of the nodes a label selector picks, which
// scale-up respects on top of --max-nodes-total, --cores-total,
// --memory-total and --gpu-total. It holds the API types, the CRD manifest,
// the validation that turns an object into a Quota, and an informer-backed
// Source the loop reads every time it scales up.
package capacityquota
