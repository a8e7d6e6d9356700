package cloudprovider

import "time"

// Options are the flags a provider may read to build itself; the builder
// maps them from config.Options (field names as there). Each provider reads
// the few it needs.
type Options struct {
	// CloudConfig is --cloud-config: the provider's own configuration file
	// (for clusterapi, the management cluster's kubeconfig).
	CloudConfig string
	// NodeGroups are the raw --nodes values, <min>:<max>:<rest>.
	NodeGroups []string
	// NodeGroupAutoDiscovery are the raw --node-group-auto-discovery values.
	NodeGroupAutoDiscovery []string
	// Namespace is the autoscaler's own (--namespace).
	Namespace string
	// Kubeconfig, KubernetesURL, KubeClientQPS, KubeClientBurst and
	// UserAgent are how the autoscaler reaches its cluster; a provider
	// reaching another one (clusterapi's management cluster) follows them.
	Kubeconfig      string
	KubernetesURL   string
	KubeClientQPS   float64
	KubeClientBurst int
	UserAgent       string
	// ClusterAPICloudConfigAuthoritative: the clusterapi provider never
	// falls back from an empty CloudConfig to Kubeconfig.
	ClusterAPICloudConfigAuthoritative bool
	// AWSInterruptionQueue is --aws-interruption-queue: the SQS queue (URL
	// or name) the aws provider reads interruption notices from; empty for
	// none. AWSInterruptionRebalance hands rebalance recommendations on too.
	AWSInterruptionQueue     string
	AWSInterruptionRebalance bool
	// AWSInterruptedCapacityAvoidTime is --aws-interrupted-capacity-avoid-time.
	AWSInterruptedCapacityAvoidTime time.Duration
	// AWSCapacityBlockDrainBefore is --aws-capacity-block-drain-before.
	AWSCapacityBlockDrainBefore time.Duration
	// KwokProviderEnabled opts the kwok provider into the cluster it runs
	// against.
	KwokProviderEnabled bool
}
