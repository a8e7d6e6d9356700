package main

import (
	"errors"
	goflag "flag"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"
	logsapi "k8s.io/component-base/logs/api/v1"

	"k8s.io/autoscaler/cluster-autoscaler/builder"
	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// flagStatus says what this build does with a flag it accepts.
type flagStatus int

const (
	implemented    flagStatus = iota
	notImplemented            // accepted, logged at start-up when set
	otherProvider             // belongs to a cloud provider this build does not ship
	removedFlag               // removed upstream; accepted with a deprecation warning
	byDesign                  // accepted; this design has no such knob (the FAQ says why)
)

// commandLine is the parsed command line: the options plus what start-up
// needs to report about the flags themselves.
type commandLine struct {
	opts    config.Options
	fs      *pflag.FlagSet
	status  map[string]flagStatus
	version bool

	// Values of flags that exist only so that upstream manifests parse.
	ignored ignoredValues
	// Removed upstream flags.
	maxEmptyBulkDelete int
	// --estimator: only binpacking exists.
	estimator string

	// Logging: component-base's configuration and klog's flags (logging.go).
	logging      *logsapi.LoggingConfiguration
	klogFlags    *goflag.FlagSet
	featureGates map[string]bool
}

// ignoredValues holds flags that are parsed and type-checked but have no
// effect in this build (logging knobs of component-base, other providers).
type ignoredValues struct {
	bools     map[string]*bool
	strings   map[string]*string
	ints      map[string]*int
	durations map[string]*time.Duration
	slices    map[string]*[]string
}

// newCommandLine registers every flag of upstream cluster-autoscaler, with
// upstream's names, syntax and defaults, on a fresh FlagSet bound to Defaults().
func newCommandLine() *commandLine {
	c := &commandLine{
		opts:   config.Defaults(),
		fs:     pflag.NewFlagSet("cluster-autoscaler", pflag.ContinueOnError),
		status: map[string]flagStatus{},
		ignored: ignoredValues{
			bools: map[string]*bool{}, strings: map[string]*string{}, ints: map[string]*int{},
			durations: map[string]*time.Duration{}, slices: map[string]*[]string{},
		},
	}
	// Upstream normalises '_' to '-', so --log_dir and --log-dir both work.
	c.fs.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		return pflag.NormalizedName(strings.ReplaceAll(name, "_", "-"))
	})
	c.fs.SortFlags = true
	c.registerProcess()
	c.registerLoopAndCloud()
	c.registerScaleUp()
	c.registerNodeGroupDefaults()
	c.registerScaleDown()
	c.registerStatusAndProvReq()
	c.registerLogging()
	c.registerHealing()
	c.registerDisruption()
	c.registerOtherProviders()
	c.registerRemoved()
	c.markByDesign()
	return c
}

func (c *commandLine) mark(s flagStatus, names ...string) {
	for _, n := range names {
		if c.fs.Lookup(n) == nil {
			panic("marking unregistered flag " + n)
		}
		c.status[n] = s
	}
}

func (c *commandLine) registerProcess() {
	o, fs := &c.opts, c.fs
	fs.BoolVar(&c.version, "version", false, "Print the version and exit.")
	fs.StringVar(&o.Address, "address", o.Address, "Address to serve /metrics, /health-check and (with --profiling) /debug/pprof on.")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "Namespace the autoscaler runs in: its Lease, status ConfigMap and priority-expander ConfigMap live here.")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Path to a kubeconfig file; empty means in-cluster configuration.")
	fs.StringVar(&o.KubernetesURL, "kubernetes", o.KubernetesURL, "Kubernetes API server URL; overrides the kubeconfig's server. Empty means the default.")
	fs.Float64Var(&o.KubeClientQPS, "kube-client-qps", o.KubeClientQPS, "Sustained queries per second allowed to the API server.")
	fs.IntVar(&o.KubeClientBurst, "kube-client-burst", o.KubeClientBurst, "Burst of queries allowed to the API server.")
	fs.StringVar(&o.KubeAPIContentType, "kube-api-content-type", o.KubeAPIContentType, "Content type for built-in API types; custom resources always use JSON.")
	fs.StringVar(&o.UserAgent, "user-agent", o.UserAgent, "User agent sent to the API server and cloud APIs.")
	fs.BoolVar(&o.Profiling, "profiling", o.Profiling, "Serve /debug/pprof/ on --address.")
	fs.StringVar(&o.ClusterName, "cluster-name", o.ClusterName, "Name of the autoscaled cluster, for providers that need it.")

	le := &o.LeaderElection
	fs.BoolVar(&le.Enabled, "leader-elect", le.Enabled, "Hold a Lease before acting, so that only one replica scales the cluster.")
	fs.DurationVar(&le.LeaseDuration, "leader-elect-lease-duration", le.LeaseDuration, "How long a Lease stays valid without renewal; a standby takes over after it.")
	fs.DurationVar(&le.RenewDeadline, "leader-elect-renew-deadline", le.RenewDeadline, "How long the leader keeps trying to renew before it gives up; below the lease duration.")
	fs.DurationVar(&le.RetryPeriod, "leader-elect-retry-period", le.RetryPeriod, "Pause between attempts to acquire or renew the Lease.")
	fs.StringVar(&le.ResourceLock, "leader-elect-resource-lock", le.ResourceLock, "Lock type; only \"leases\" is supported.")
	fs.StringVar(&le.ResourceName, "leader-elect-resource-name", le.ResourceName, "Name of the Lease object.")
	fs.StringVar(&le.ResourceNamespace, "leader-elect-resource-namespace", le.ResourceNamespace, "Ignored, as upstream: the Lease lives in --namespace.")
	c.mark(otherProvider, "cluster-name")
}

func (c *commandLine) registerLoopAndCloud() {
	o, fs := &c.opts, c.fs
	fs.DurationVar(&o.ScanInterval, "scan-interval", o.ScanInterval, "How often the cluster is re-evaluated.")
	fs.BoolVar(&o.FrequentLoopsEnabled, "frequent-loops-enabled", o.FrequentLoopsEnabled, "Run the next loop at once after a productive loop or when a new unschedulable pod appears.")
	fs.DurationVar(&o.ScaleUpBatchIdle, "scale-up-batch-idle-duration", o.ScaleUpBatchIdle, "A loop asked for by new unschedulable pods starts once no new one arrived for this long, so that a burst gets one scale-up; 0 starts it at once (not upstream).")
	fs.DurationVar(&o.ScaleUpBatchMax, "scale-up-batch-max-duration", o.ScaleUpBatchMax, "The longest a burst of new unschedulable pods holds its loop back, counted from the first pod (not upstream).")
	fs.Float64Var(&o.HeapHeadroomRatio, "heap-headroom-ratio", o.HeapHeadroomRatio, "After each garbage collection the heap may grow by this share of its live part (at least 64 MiB) before the next one; 0 leaves it to GOGC (not upstream). A cgroup memory limit caps it at 90% of the limit; GOGC or GOMEMLIMIT in the environment turn it off.")
	fs.DurationVar(&o.MaxInactivity, "max-inactivity", o.MaxInactivity, "/health-check fails when no loop has started for this long.")
	fs.DurationVar(&o.MaxFailingTime, "max-failing-time", o.MaxFailingTime, "/health-check fails when no loop has succeeded for this long.")
	fs.DurationVar(&o.MaxStartupTime, "max-startup-time", o.MaxStartupTime, "/health-check fails when the first successful loop takes longer than this.")

	fs.StringVar(&o.CloudProvider, "cloud-provider", o.CloudProvider, "Cloud provider that owns the node groups.")
	fs.StringVar(&o.CloudConfig, "cloud-config", o.CloudConfig, "Path to the cloud provider's configuration file; empty for none.")
	fs.BoolVar(&o.ClusterAPICloudConfigAuthoritative, "clusterapi-cloud-config-authoritative", o.ClusterAPICloudConfigAuthoritative,
		"Cluster API only: --cloud-config alone names the management cluster; when it is empty the management cluster is the in-cluster one, never --kubeconfig's.")
	fs.BoolVar(&o.KwokProviderEnabled, "kwok-provider-enabled", o.KwokProviderEnabled,
		"kwok only: the cluster is meant to get the kwok provider's simulated Nodes. Without it, or the ConfigMap kwok-provider-config in --namespace, --cloud-provider=kwok refuses to start (not upstream).")
	fs.StringVar(&o.AWSInterruptionQueue, "aws-interruption-queue", o.AWSInterruptionQueue,
		"aws only: the SQS queue (URL or name) that EventBridge rules fill with EC2 Spot interruption warnings, rebalance recommendations, instance state changes and AWS Health scheduled changes; a notice for an instance of a managed group replaces and drains its node at once (reason interrupted). Empty: off (not upstream).")
	fs.BoolVar(&o.AWSInterruptionRebalance, "aws-interruption-rebalance", o.AWSInterruptionRebalance,
		"aws only, with --aws-interruption-queue: also act on EC2 rebalance recommendations (otherwise they are deleted as ignored) (not upstream).")
	fs.DurationVar(&o.AWSCapacityBlockDrainBefore, "aws-capacity-block-drain-before", o.AWSCapacityBlockDrainBefore,
		"aws only: this long before an EC2 Capacity Block for ML ends, the nodes of the groups launching into it are drained and deleted without replacement in the group (disruption reason reservationending; pods go to other groups), ProvisioningRequests on them get CapacityRevoked, and the group launches no more into the block. 0: off (not upstream).")
	fs.DurationVar(&o.AWSInterruptedCapacityAvoidTime, "aws-interrupted-capacity-avoid-time", o.AWSInterruptedCapacityAvoidTime,
		"aws only, with --aws-interruption-queue: after a Spot interruption warning, the group's Spot capacity of the interrupted instance type and zone counts as gone for this long; a group all of whose Spot offerings are gone (and that cannot launch On-Demand) is backed off (code SpotInterrupted) so that other groups take the pods. 0: off (not upstream).")
	fs.StringArrayVar(&o.NodeGroups, "nodes", o.NodeGroups, "Node group as <min>:<max>:<name>; repeat the flag for more groups.")
	fs.StringArrayVar(&o.NodeGroupAutoDiscovery, "node-group-auto-discovery", o.NodeGroupAutoDiscovery, "Node group auto-discovery spec <discoverer>:[<key>[=<value>]]; repeatable, specs are ORed. clusterapi:namespace=<ns>,clusterName=<name>,<label>=<value> (the clusterapi provider); kwok:<label>[=<value>],... keeps the kwok groups whose template has those labels; the externalgrpc provider's server lists its groups itself.")
	fs.IntVar(&o.MaxNodesTotal, "max-nodes-total", o.MaxNodesTotal, "Maximum number of nodes in all node groups; 0 means no limit.")
	fs.Var(rangeValue{&o.Cores}, "cores-total", "Minimum and maximum cores in the cluster, <min>:<max>.")
	fs.Var(rangeValue{&o.MemoryGiB}, "memory-total", "Minimum and maximum memory in the cluster in GiB, <min>:<max>.")
	fs.Var(gpuLimitsValue{&o.GPUTotal}, "gpu-total", "Minimum and maximum count of a GPU type, <gpu_type>:<min>:<max>; repeatable (a type given again takes the new limit).")
}

func (c *commandLine) registerScaleUp() {
	o, fs := &c.opts, c.fs
	fs.Var(commaListValue{&o.Expanders}, "expander", "Expanders to apply in order, comma-separated: random, most-pods, least-waste, least-nodes, price, priority, grpc.")
	fs.StringVar(&o.GRPCExpanderURL, "grpc-expander-url", o.GRPCExpanderURL, "Address of the gRPC expander server.")
	fs.StringVar(&o.GRPCExpanderCert, "grpc-expander-cert", o.GRPCExpanderCert, "CA certificate for the gRPC expander's TLS connection.")
	fs.DurationVar(&o.GRPCExpanderTimeout, "grpc-expander-timeout", o.GRPCExpanderTimeout, "Longest wait for one answer of the gRPC expander; past it, or on an error, an empty answer or an unknown node group, the next expander of --expander decides (least-waste when grpc is the last) (not upstream).")
	fs.IntVar(&o.MaxNodesPerScaleUp, "max-nodes-per-scaleup", o.MaxNodesPerScaleUp, "Maximum nodes added to one node group by one scale-up decision.")
	fs.DurationVar(&o.MaxNodeGroupBinpackingDuration, "max-nodegroup-binpacking-duration", o.MaxNodeGroupBinpackingDuration, "Time budget of the estimate for one node group.")
	fs.DurationVar(&o.MaxBinpackingTime, "max-binpacking-time", o.MaxBinpackingTime, "Time budget of all the node group estimates of one scale-up; past it, the options already estimated are all the expander chooses from.")
	fs.DurationVar(&o.NewPodScaleUpDelay, "new-pod-scale-up-delay", o.NewPodScaleUpDelay, "Pods younger than this do not trigger a scale-up.")
	fs.BoolVar(&o.BalanceSimilarNodeGroups, "balance-similar-node-groups", o.BalanceSimilarNodeGroups, "Spread scale-ups over similar node groups.")
	fs.StringArrayVar(&o.BalancingLabels, "balancing-label", o.BalancingLabels, "Label that alone decides node group similarity; repeatable.")
	fs.StringArrayVar(&o.BalancingIgnoreLabels, "balancing-ignore-label", o.BalancingIgnoreLabels, "Label ignored when comparing node groups; repeatable.")
	fs.Float64Var(&o.MaxAllocatableDifferenceRatio, "max-allocatable-difference-ratio", o.MaxAllocatableDifferenceRatio, "Largest allocatable difference between similar node groups, as a ratio of the smaller.")
	fs.Float64Var(&o.MaxFreeDifferenceRatio, "max-free-difference-ratio", o.MaxFreeDifferenceRatio, "Largest free-resource difference between similar node groups, as a ratio of the smaller.")
	fs.Float64Var(&o.MemoryDifferenceRatio, "memory-difference-ratio", o.MemoryDifferenceRatio, "Largest memory capacity difference between similar node groups, as a ratio of the smaller.")
	fs.IntVar(&o.ExpendablePodsPriorityCutoff, "expendable-pods-priority-cutoff", o.ExpendablePodsPriorityCutoff, "Pods below this priority never trigger scale-up and never block scale-down.")
	fs.BoolVar(&o.EnforceNodeGroupMinSize, "enforce-node-group-min-size", o.EnforceNodeGroupMinSize, "Scale node groups below their minimum up to it.")
	fs.BoolVar(&o.ScaleUpFromZero, "scale-up-from-zero", o.ScaleUpFromZero, "Scale up when the cluster has no ready node; when false, a loop that finds no ready node does nothing (no cleanup, no scaling).")
	fs.DurationVar(&o.InitialNodeGroupBackoff, "initial-node-group-backoff-duration", o.InitialNodeGroupBackoff, "First back-off of a node group after a failed scale-up.")
	fs.DurationVar(&o.MaxNodeGroupBackoff, "max-node-group-backoff-duration", o.MaxNodeGroupBackoff, "Longest back-off of a node group.")
	fs.DurationVar(&o.NodeGroupBackoffResetTimeout, "node-group-backoff-reset-timeout", o.NodeGroupBackoffResetTimeout, "A node group's back-off resets after this long without failures.")
	fs.IntVar(&o.OkTotalUnreadyCount, "ok-total-unready-count", o.OkTotalUnreadyCount, "Unready nodes tolerated whatever their share.")
	fs.Float64Var(&o.MaxTotalUnreadyPercentage, "max-total-unready-percentage", o.MaxTotalUnreadyPercentage, "Share of unready nodes above which the autoscaler stops scaling.")
	fs.StringArrayVar(&o.StartupTaints, "startup-taint", o.StartupTaints, "Taint key treated as a startup taint: a node carrying it counts as starting (not ready, not unready) until --max-node-startup-time, and it is stripped from node group templates; repeatable.")
	fs.StringArrayVar(&o.StartupTaintPrefixes, "startup-taint-prefix", o.StartupTaintPrefixes, "Taint key prefix treated as a startup taint, besides the built-in startup-taint.cluster-autoscaler.kubernetes.io/; repeatable.")
	fs.StringArrayVar(&o.StatusTaints, "status-taint", o.StatusTaints, "Taint key stripped from node group templates that never makes a node count as starting or unready; repeatable.")
	fs.StringArrayVar(&o.IgnoreTaints, "ignore-taint", o.IgnoreTaints, "Deprecated alias of --startup-taint; repeatable.")
	fs.StringSliceVar(&o.AllowedSchedulerNames, "allowed-scheduler-names", o.AllowedSchedulerNames, "Only pending pods of these schedulers (spec.schedulerName) trigger scale-up; empty means all.")
	fs.StringSliceVar(&o.BypassedSchedulerNames, "bypassed-scheduler-names", o.BypassedSchedulerNames, "Pending pods of these schedulers trigger scale-up before their scheduler has processed them; must be a subset of a non-empty --allowed-scheduler-names.")
	fs.BoolVar(&o.ForceDaemonSets, "force-ds", o.ForceDaemonSets, "Put every missing DaemonSet pod that would run there on a template made from a real node, fitting or not, so that a node group too small for all its DaemonSet pods gets no scale-up; without it only the missing ones that fit are added. Provider templates always carry all.")
	fs.IntVar(&o.PodInjectionLimit, "pod-injection-limit", o.PodInjectionLimit, "Most pending pods counted in one loop when stand-ins are counted for pods a ReplicaSet, StatefulSet or Job has still to create; when the unschedulable pods reach it, no stand-ins are counted (the pods themselves are never dropped). A larger workload is counted in consecutive pieces of at most this size, a loop after the other.")
	fs.StringVar(&o.SchedulerConfigFile, "scheduler-config-file", o.SchedulerConfigFile, "KubeSchedulerConfiguration whose Filter plugins the simulation uses.")
	fs.IntVar(&o.PredicateParallelism, "predicate-parallelism", o.PredicateParallelism, "Parallelism of scheduler Filter checks.")
	fs.BoolVar(&o.CapacityQuotasEnabled, "capacity-quotas-enabled", o.CapacityQuotasEnabled,
		"Respect CapacityQuota objects (autoscaling.x-k8s.io/v1beta1): no scale-up beyond the summed resources they allow the nodes they select.")
	fs.IntVar(&o.SchedulerVerbosity, "scheduler-verbosity", o.SchedulerVerbosity,
		"Verbosity threshold for the logs of the scheduler framework and its plugins during simulation (also capped by -v).")
	fs.BoolVar(&o.ForceDeleteUnregisteredNodes, "force-delete-unregistered-nodes", o.ForceDeleteUnregisteredNodes, "Delete long-unregistered instances even below the node group's minimum.")
	fs.BoolVar(&o.ForceDeleteFailedNodes, "force-delete-failed-nodes", o.ForceDeleteFailedNodes, "Delete instances that failed to be created even below the node group's minimum.")
	fs.BoolVar(&o.DryRunDeletions, "dry-run-deletions", o.DryRunDeletions, "Log the broken instances that would be deleted and the target sizes that would be fixed, and change nothing (not upstream).")
	fs.Float64Var(&o.UnregisteredBreakerRatio, "unregistered-nodes-breaker-ratio", o.UnregisteredBreakerRatio, "When more than this share of a node group's (or the cluster's) instances is unregistered past the provision time, delete none of them: a provider ID mismatch is likelier (not upstream).")
	fs.IntVar(&o.UnregisteredBreakerMinimum, "unregistered-nodes-breaker-minimum", o.UnregisteredBreakerMinimum, "The breaker applies only when more than this many instances are unregistered (not upstream).")
	fs.IntVar(&o.MaxBrokenNodeDeletionsPerLoop, "max-broken-node-deletions-per-loop", o.MaxBrokenNodeDeletionsPerLoop, "Most unregistered and failed instances deleted in one loop (not upstream).")

	// Upstream's experimental scale-up knobs.
	c.ignoredBool("parallel-scale-up", false, "Experimental upstream knob: parallel scale-up of node groups.")
	c.ignoredBool("salvo-scale-up", false, "Upstream knob: several scale-ups per loop. This autoscaler plans a whole backlog in one loop.")
	c.ignoredDuration("salvo-scale-up-budget", time.Minute, "Upstream knob: time budget of salvo scale-ups.")
	c.fs.DurationVar(&c.opts.PendingPodsBatchingTimeout, "pending-pods-batching-timeout", c.opts.PendingPodsBatchingTimeout,
		"With --enable-graceful-degradation: time budget of the check of pending pods against existing and upcoming nodes (upstream's filter-out-schedulable); the equivalence groups not reached within it are skipped in this loop.")
	c.fs.BoolVar(&c.opts.EnableGracefulDegradation, "enable-graceful-degradation", c.opts.EnableGracefulDegradation,
		"When the check of pending pods runs out of --pending-pods-batching-timeout, scale up for the pods checked and skip the others in this loop (skipped_pods_count, events GracefulDegradationStarted/Stopped).")
	c.fs.BoolVar(&c.opts.ScaleUpSimulationForSkippedNodeGroups, "scaleup-simulation-for-skipped-node-groups-enabled", c.opts.ScaleUpSimulationForSkippedNodeGroups,
		"Check the pods a scale-up leaves against the templates of the node groups skipped in the loop (backed off, not ready, ...), for reporting only: a skipped group whose template refuses the pods is reported to them with the scheduler's reason instead of as skipped. Timed as function_duration_seconds{function=\"scaleUp:skippedNodeGroupsSimulation\"}.")
	c.fs.BoolVar(&c.opts.ProactiveScaleupEnabled, "enable-proactive-scaleup", c.opts.ProactiveScaleupEnabled,
		"Count the pods a ReplicaSet, StatefulSet (without volumeClaimTemplates) or Job has not created yet as pending pods (stand-ins, bounded by --pod-injection-limit), so that a burst gets one scale-up; a ReplicaSet whose replicas are refused (ReplicaFailure), or a suspended, finished or failing Job, gets none, and a workload larger than the limit gets its next piece only once half of the pods counted before exist. On by default here, off upstream; false counts only the pods that exist.")
	c.fs.StringVar(&c.estimator, "estimator", "binpacking", "Estimator; only binpacking exists (anything else is a flag error, as upstream).")
	c.ignoredBool("fastpath-binpacking-enabled", false, "Upstream knob: fast-path binpacking. This autoscaler's estimator always groups equivalent pods.")
	c.fs.BoolVar(&c.opts.ScaleFromUnschedulable, "scale-from-unschedulable", c.opts.ScaleFromUnschedulable,
		"Ignore spec.unschedulable of node groups' templates; without it a group whose template is unschedulable is not scaled up.")
	c.ignoredBool("async-node-groups", false, "Create and delete node groups asynchronously (node auto-provisioning).")
	c.ignoredBool("enable-inter-pod-affinity-hostname-fast-path", false, "Upstream knob: hostname fast path of inter-pod affinity.")
	c.ignoredBool("enable-csi-node-aware-scheduling", false, "Handle CSINode objects in simulation.")
	c.fs.DurationVar(&c.opts.NodeInfoCacheExpireTime, "node-info-cache-expire-time", c.opts.NodeInfoCacheExpireTime,
		"How long a template made from a node group's node stands in for the group once it has no ready node; 0 means forever.")
	c.ignoredInt("cluster-snapshot-parallelism", 16, "Deprecated upstream: use --predicate-parallelism.")
	c.fs.BoolVar(&c.opts.CapacityBufferControllerEnabled, "capacity-buffer-controller-enabled", c.opts.CapacityBufferControllerEnabled,
		"Run the CapacityBuffer controller: translate each buffer (autoscaling.x-k8s.io) of the active-capacity strategy into a pod template and a number of chunks in its status, with the ReadyForProvisioning condition.")
	c.fs.BoolVar(&c.opts.CapacityBufferPodInjectionEnabled, "capacity-buffer-pod-injection-enabled", c.opts.CapacityBufferPodInjectionEnabled,
		"Inject, after the real pending pods, status.replicas pods of every ready CapacityBuffer's template into the scale-up (never created in the API), so that their room is kept free on running nodes; sets the Provisioning condition.")
	c.fs.BoolVar(&c.opts.CapacityBufferPodDryRunEnabled, "capacity-buffer-pod-dry-run-enabled", c.opts.CapacityBufferPodDryRunEnabled,
		"Shape each CapacityBuffer's pod by a server dry-run create (defaulting, LimitRanges, webhooks; nothing is stored), kept in a PodTemplate the buffer owns; needs permission to create pods. Acts only with --capacity-buffer-controller-enabled.")
	c.fs.BoolVar(&c.opts.CapacityBufferReadyReplicasEnabled, "capacity-buffer-ready-replicas-enabled", c.opts.CapacityBufferReadyReplicasEnabled,
		"Write each CapacityBuffer's status.readyReplicas after every loop: how many of its pods the loop placed on existing nodes (not on nodes still to come). Acts only with --capacity-buffer-pod-injection-enabled.")
	c.fs.BoolVar(&c.opts.DebuggingSnapshotEnabled, "debugging-snapshot-enabled", c.opts.DebuggingSnapshotEnabled,
		"Serve /snapshotz on --address: a GET waits for the next loop and answers its view of the cluster (nodes with their pods, each group's template node, the pending pods, the node groups' sizes and instances, each node's group) as JSON, which cluster-autoscaler explain --snapshot reads.")
	c.fs.BoolVar(&c.opts.ExplainEnabled, "explain-enabled", c.opts.ExplainEnabled,
		"Keep the last loop's reasons (each pending pod group's verdict from each node group, each node's scale-down verdict) and serve them, read-only, on /explainz on --explain-address (and, with --explain-on-metrics-port, on --address): ?pod=NS/NAME, ?node=NAME, ?provisioningrequest=NS/NAME; text, or JSON with &format=json.")
	c.fs.StringVar(&c.opts.ExplainAddress, "explain-address", c.opts.ExplainAddress,
		"host:port of a listener of its own serving only /explainz; loopback by default, so that it is reached from outside the pod only through kubectl port-forward (the pods/portforward permission); \"\" for no such listener (not upstream).")
	c.fs.BoolVar(&c.opts.ExplainOnMetricsPort, "explain-on-metrics-port", c.opts.ExplainOnMetricsPort,
		"Serve /explainz on --address too, without authentication: whoever reaches that port (the chart's Service: every pod of the cluster) reads pending pods', nodes' and PodDisruptionBudgets' names of every namespace (not upstream).")
}

func (c *commandLine) registerNodeGroupDefaults() {
	d, fs := &c.opts.NodeGroupDefaults, c.fs
	fs.Float64Var(&d.ScaleDownUtilizationThreshold, "scale-down-utilization-threshold", d.ScaleDownUtilizationThreshold, "A node whose largest cpu or memory request share is below this may be removed.")
	fs.Float64Var(&d.ScaleDownGPUUtilizationThreshold, "scale-down-gpu-utilization-threshold", d.ScaleDownGPUUtilizationThreshold, "A GPU node whose GPU request share is below this may be removed.")
	fs.DurationVar(&d.ScaleDownUnneededTime, "scale-down-unneeded-time", d.ScaleDownUnneededTime, "How long a node must be unneeded before it is removed.")
	fs.DurationVar(&d.ScaleDownUnreadyTime, "scale-down-unready-time", d.ScaleDownUnreadyTime, "How long an unready node must be unneeded before it is removed.")
	fs.DurationVar(&d.MaxNodeProvisionTime, "max-node-provision-time", d.MaxNodeProvisionTime, "How long a new instance may take to register as a node.")
	fs.DurationVar(&d.MaxNodeStartupTime, "max-node-startup-time", d.MaxNodeStartupTime, "How long a registered node may take to become ready.")
	fs.BoolVar(&d.IgnoreDaemonSetsUtilization, "ignore-daemonsets-utilization", d.IgnoreDaemonSetsUtilization, "Leave DaemonSet pods out of node utilisation.")

}

func (c *commandLine) registerScaleDown() {
	o, fs := &c.opts, c.fs
	fs.BoolVar(&o.ScaleDownEnabled, "scale-down-enabled", o.ScaleDownEnabled, "Remove unneeded nodes.")
	fs.BoolVar(&o.ScaleDownUnreadyEnabled, "scale-down-unready-enabled", o.ScaleDownUnreadyEnabled, "Remove unneeded unready nodes.")
	fs.DurationVar(&o.ScaleDownDelayAfterAdd, "scale-down-delay-after-add", o.ScaleDownDelayAfterAdd, "Scale-down waits this long after a scale-up.")
	fs.DurationVar(&o.ScaleDownDelayAfterDelete, "scale-down-delay-after-delete", o.ScaleDownDelayAfterDelete, "Scale-down waits this long after a node deletion.")
	fs.DurationVar(&o.ScaleDownDelayAfterFailure, "scale-down-delay-after-failure", o.ScaleDownDelayAfterFailure, "Scale-down waits this long after a failed scale-down.")
	fs.BoolVar(&o.ScaleDownDelayTypeLocal, "scale-down-delay-type-local", o.ScaleDownDelayTypeLocal, "Apply the --scale-down-delay-after-* delays per node group (a group's scale-up, deletion or failed deletion holds only that group's nodes) rather than cluster-wide.")
	fs.BoolVar(&o.IgnoreMirrorPodsUtilization, "ignore-mirror-pods-utilization", o.IgnoreMirrorPodsUtilization, "Leave mirror pods out of node utilisation.")
	fs.IntVar(&o.MaxScaleDownParallelism, "max-scale-down-parallelism", o.MaxScaleDownParallelism, "Most nodes deleted at once, empty or drained.")
	fs.IntVar(&o.MaxDrainParallelism, "max-drain-parallelism", o.MaxDrainParallelism, "Most nodes drained at once.")
	fs.IntVar(&o.MaxGracefulTerminationSec, "max-graceful-termination-sec", o.MaxGracefulTerminationSec, "Longest grace period given to an evicted pod, in seconds.")
	fs.DurationVar(&o.MaxPodEvictionTime, "max-pod-eviction-time", o.MaxPodEvictionTime, "How long to keep trying to evict one pod.")
	fs.DurationVar(&o.NodeDeleteDelayAfterTaint, "node-delete-delay-after-taint", o.NodeDeleteDelayAfterTaint, "Pause between tainting a node ToBeDeleted and draining or deleting it.")
	fs.BoolVar(&o.DynamicNodeDeleteDelayAfterTaint, "dynamic-node-delete-delay-after-taint-enabled", o.DynamicNodeDeleteDelayAfterTaint,
		"Replace --node-delete-delay-after-taint by twice the longest time, over the last hour, between writing a ToBeDeleted taint and seeing it in the node informer.")
	fs.BoolVar(&o.SkipNodesWithSystemPods, "skip-nodes-with-system-pods", o.SkipNodesWithSystemPods, "Keep nodes running kube-system pods that no PDB covers.")
	fs.BoolVar(&o.SkipNodesWithLocalStorage, "skip-nodes-with-local-storage", o.SkipNodesWithLocalStorage, "Keep nodes running pods with local storage (emptyDir, hostPath).")
	fs.BoolVar(&o.SkipNodesWithCustomControllerPods, "skip-nodes-with-custom-controller-pods", o.SkipNodesWithCustomControllerPods, "Keep nodes running pods owned by custom controllers.")
	fs.IntVar(&o.MinReplicaCount, "min-replica-count", o.MinReplicaCount, "Replica sets smaller than this keep their nodes.")
	fs.BoolVar(&o.DaemonSetEvictionForEmptyNodes, "daemonset-eviction-for-empty-nodes", o.DaemonSetEvictionForEmptyNodes, "Evict DaemonSet pods from empty nodes before deleting them.")
	fs.BoolVar(&o.DaemonSetEvictionForOccupiedNodes, "daemonset-eviction-for-occupied-nodes", o.DaemonSetEvictionForOccupiedNodes, "Evict DaemonSet pods from drained nodes before deleting them.")
	fs.BoolVar(&o.CordonNodeBeforeTerminating, "cordon-node-before-terminating", o.CordonNodeBeforeTerminating, "Mark nodes unschedulable before deleting them.")
	fs.IntVar(&o.ScaleDownNonEmptyCandidatesCount, "scale-down-non-empty-candidates-count", o.ScaleDownNonEmptyCandidatesCount, "Most non-empty nodes newly found unneeded (new drain candidates) per loop; the previous loop's candidates are checked again on top. <= 0 lifts this limit and the pool's.")
	fs.Float64Var(&o.ScaleDownCandidatesPoolRatio, "scale-down-candidates-pool-ratio", o.ScaleDownCandidatesPoolRatio, "Share of the cluster's nodes simulated per loop as new drain candidates beyond the previous loop's, drawn in rotation; 1.0 means all.")
	fs.IntVar(&o.ScaleDownCandidatesPoolMinCount, "scale-down-candidates-pool-min-count", o.ScaleDownCandidatesPoolMinCount, "Least number of nodes simulated per loop as new drain candidates: the pool is max(nodes x ratio, this).")
	fs.DurationVar(&o.ScaleDownSimulationTimeout, "scale-down-simulation-timeout", o.ScaleDownSimulationTimeout, "Time budget of one loop's scale-down simulation; the nodes not reached wait for a later loop.")
	fs.DurationVar(&o.UnremovableNodeRecheckTimeout, "unremovable-node-recheck-timeout", o.UnremovableNodeRecheckTimeout, "A node the simulation found unremovable is not simulated again for this long (reason RecentlyUnremovable meanwhile), unless its own pods, Node or covering PodDisruptionBudgets change.")
	fs.IntVar(&o.MaxBulkSoftTaintCount, "max-bulk-soft-taint-count", o.MaxBulkSoftTaintCount, "Most nodes given the PreferNoSchedule candidate taint per loop; 0 writes none (the unneeded timers then live in memory only and restart with the process).")
	fs.DurationVar(&o.MaxBulkSoftTaintTime, "max-bulk-soft-taint-time", o.MaxBulkSoftTaintTime, "Time budget per loop of writing and removing the PreferNoSchedule candidate taints (shared with --max-bulk-soft-taint-count); the rest wait for a later loop.")
	fs.DurationVar(&o.NodeDeletionDelayTimeout, "node-deletion-delay-timeout", o.NodeDeletionDelayTimeout, "How long a node's delay-deletion.cluster-autoscaler.kubernetes.io/ annotations hold its deletion before it is deleted anyway.")
	fs.DurationVar(&o.NodeDeletionBatcherInterval, "node-deletion-batcher-interval", o.NodeDeletionBatcherInterval, "Deletions of a node group's nodes that come within this long after the first one go in one DeleteNodes call; 0 deletes each removal's nodes at once.")
	fs.DurationVar(&o.NodeDeletionCandidateTTL, "node-deletion-candidate-ttl", o.NodeDeletionCandidateTTL, "A DeletionCandidate taint older than this, left by an earlier run, is not trusted: the node's unneeded timer restarts; 0 means such taints never go stale.")
	fs.DurationVar(&o.BlockingSystemPodDisruptionTimeout, "blocking-system-pod-distruption-timeout", o.BlockingSystemPodDisruptionTimeout, "After this long, kube-system pods without a PDB no longer block removal.")
	fs.StringVar(&o.DrainPriorityConfig, "drain-priority-config", o.DrainPriorityConfig, "Drain in priority rounds, <priority>:<gracePeriodSeconds>,... (e.g. 10000:20,1000:100,0:60): a pod joins the highest priority not above its own (the lowest when all are), rounds go lowest first, each waiting for the previous one's pods to be gone, each pod given at most its round's grace period; excludes --max-graceful-termination-sec.")
	// Every flag above is acted on; the ones below are not yet.
	c.ignoredBool("node-removal-latency-tracking-enabled", false, "Track latency from unneeded to removed.")
	fs.BoolVar(&o.MaxNodeSkipEvalTimeTrackerEnabled, "max-node-skip-eval-time-tracker-enabled", o.MaxNodeSkipEvalTimeTrackerEnabled, "Track the longest time a node was left out of the scale-down simulation (time budget, candidate limits).")
}

func (c *commandLine) registerStatusAndProvReq() {
	o, fs := &c.opts, c.fs
	fs.BoolVar(&o.WriteStatusConfigMap, "write-status-configmap", o.WriteStatusConfigMap, "Write the status ConfigMap every loop (a loop that changed only its times skips the write while the last one is under 10s old).")
	fs.StringVar(&o.StatusConfigMapName, "status-config-map-name", o.StatusConfigMapName, "Name of the status ConfigMap in --namespace.")
	fs.BoolVar(&o.EmitPerNodeGroupMetrics, "emit-per-nodegroup-metrics", o.EmitPerNodeGroupMetrics, "Export per-node-group gauges.")
	fs.BoolVar(&o.RecordDuplicatedEvents, "record-duplicated-events", o.RecordDuplicatedEvents, "Record similar events again within five minutes.")

	fs.BoolVar(&o.EnableProvisioningRequests, "enable-provisioning-requests", o.EnableProvisioningRequests, "Handle ProvisioningRequest objects.")
	fs.DurationVar(&o.ProvReqInitialBackoff, "provisioning-request-initial-backoff-time", o.ProvReqInitialBackoff, "First retry delay of a ProvisioningRequest that could not be provisioned.")
	fs.DurationVar(&o.ProvReqMaxBackoff, "provisioning-request-max-backoff-time", o.ProvReqMaxBackoff, "Longest retry delay of a ProvisioningRequest.")
	fs.IntVar(&o.ProvReqMaxBackoffCacheSize, "provisioning-request-max-backoff-cache-size", o.ProvReqMaxBackoffCacheSize, "Most ProvisioningRequests whose retry delay is remembered.")
	fs.DurationVar(&o.ProvReqBookingTime, "provisioning-request-booking-time", o.ProvReqBookingTime, "How long the capacity of a provisioned ProvisioningRequest stays reserved for its pods (not upstream: upstream has 10m fixed).")
	fs.DurationVar(&o.ProvReqTemplateGracePeriod, "provisioning-request-pod-template-grace-period", o.ProvReqTemplateGracePeriod, "How long a ProvisioningRequest's missing PodTemplate is waited for before the request fails (not upstream).")
	fs.DurationVar(&o.ProvReqExpiryTime, "provisioning-request-expiry-time", o.ProvReqExpiryTime, "A ProvisioningRequest not provisioned this long after creation fails as Expired (not upstream: upstream has 7 days fixed).")
	fs.DurationVar(&o.ProvReqRetentionTime, "provisioning-request-retention-time", o.ProvReqRetentionTime, "A finished ProvisioningRequest is deleted this long after its last condition change (not upstream: upstream has 7 days fixed).")
	fs.DurationVar(&o.ProvReqMaxRunGrace, "provisioning-request-max-run-grace", o.ProvReqMaxRunGrace, "Once a ProvisioningRequest's maxRunDurationSeconds has passed (its capacity revoked), the nodes its scale-up made are released through the disruption engine as soon as its pods are gone from them, and at the latest this long after (then drained as for any reason, PDBs honoured) (not upstream).")
	fs.IntVar(&o.ProvReqMaxPods, "max-pods-per-provisioning-request", o.ProvReqMaxPods, "A ProvisioningRequest asking for more pods than this (the sum of its PodSets' counts) fails with reason TooManyPods, and its pods are never built (not upstream: upstream has no cap).")
	fs.BoolVar(&o.CheckCapacityBatchProcessing, "check-capacity-batch-processing", o.CheckCapacityBatchProcessing, "With it, --check-capacity-provisioning-request-max-batch-size caps the check-capacity requests answered per loop, as upstream; without it every eligible request is answered each loop within the timebox (upstream: one per loop).")
	fs.DurationVar(&o.CheckCapacityBatchTimebox, "check-capacity-provisioning-request-batch-timebox", o.CheckCapacityBatchTimebox, "Time budget of one batch of check-capacity requests.")
	fs.IntVar(&o.CheckCapacityMaxBatchSize, "check-capacity-provisioning-request-max-batch-size", o.CheckCapacityMaxBatchSize, "Most check-capacity requests answered per loop when --check-capacity-batch-processing is set.")
	fs.StringVar(&o.CheckCapacityProcessorInstance, "check-capacity-processor-instance", o.CheckCapacityProcessorInstance, "Handle only check-capacity requests whose processorInstance parameter equals this.")
	fs.BoolVar(&o.EnableDynamicResourceAllocation, "enable-dynamic-resource-allocation", o.EnableDynamicResourceAllocation, "Handle DRA objects; locked to true.")
	// --enable-dynamic-resource-allocation acts: false is refused (locked to true, as upstream).
}

// markByDesign lists upstream's knobs this design has no use for; the FAQ
// ("Which flags are accepted, and which act?") says why, flag by flag.
func (c *commandLine) markByDesign() {
	c.mark(byDesign, "enable-csi-node-aware-scheduling", "node-removal-latency-tracking-enabled",
		"enable-inter-pod-affinity-hostname-fast-path",
		"fastpath-binpacking-enabled", "parallel-scale-up", "salvo-scale-up",
		"salvo-scale-up-budget", "cluster-snapshot-parallelism")
	c.mark(otherProvider, "async-node-groups")
}

// registerOtherProviders accepts the flags of cloud providers this build does not ship.
func (c *commandLine) registerOtherProviders() {
	c.ignoredBool("aws-use-static-instance-list", false, "AWS: no effect (a warning when true); instance types are always read with DescribeInstanceTypes, each once, and kept; no built-in list exists.")
	c.ignoredBool("bulk-mig-instances-listing-enabled", false, "GCE only.")
	c.ignoredInt("gce-concurrent-refreshes", 1, "GCE only.")
	c.ignoredDuration("gce-mig-instances-min-refresh-wait-time", 5*time.Second, "GCE only.")
	c.ignoredSlice("cloud-provider-gce-l7lb-src-cidrs", []string{"130.211.0.0/22", "35.191.0.0/16"}, "GCE only.")
	c.ignoredSlice("cloud-provider-gce-lb-src-cidrs", []string{"130.211.0.0/22", "209.85.152.0/22", "209.85.204.0/22", "35.191.0.0/16"}, "GCE only.")
	c.ignoredBool("regional", false, "GCE only: the cluster is regional.")
	c.mark(byDesign, "aws-use-static-instance-list")
	c.mark(otherProvider, "bulk-mig-instances-listing-enabled", "gce-concurrent-refreshes",
		"gce-mig-instances-min-refresh-wait-time", "cloud-provider-gce-l7lb-src-cidrs", "cloud-provider-gce-lb-src-cidrs",
		"regional")
}

// registerRemoved accepts flags upstream removed but old manifests still pass.
func (c *commandLine) registerRemoved() {
	c.fs.IntVar(&c.maxEmptyBulkDelete, "max-empty-bulk-delete", 10, "Removed upstream; sets --max-scale-down-parallelism when that is not given.")
	c.ignoredBool("node-autoprovisioning-enabled", false, "Removed upstream.")
	c.ignoredInt("max-autoprovisioned-node-group-count", 15, "Removed upstream.")
	c.ignoredBool("gce-expander-ephemeral-storage-support", true, "Removed upstream.")
	for _, n := range []string{"max-empty-bulk-delete", "node-autoprovisioning-enabled", "max-autoprovisioned-node-group-count",
		"gce-expander-ephemeral-storage-support"} {
		c.status[n] = removedFlag
		c.fs.Lookup(n).Hidden = true
	}
}

func (c *commandLine) ignoredBool(name string, def bool, usage string) {
	v := new(bool)
	c.fs.BoolVar(v, name, def, usage)
	c.ignored.bools[name] = v
	c.status[name] = notImplemented
}

func (c *commandLine) ignoredInt(name string, def int, usage string) {
	v := new(int)
	c.fs.IntVar(v, name, def, usage)
	c.ignored.ints[name] = v
	c.status[name] = notImplemented
}

func (c *commandLine) ignoredDuration(name string, def time.Duration, usage string) {
	v := new(time.Duration)
	c.fs.DurationVar(v, name, def, usage)
	c.ignored.durations[name] = v
	c.status[name] = notImplemented
}

func (c *commandLine) ignoredSlice(name string, def []string, usage string) {
	v := new([]string)
	c.fs.StringSliceVar(v, name, def, usage)
	c.ignored.slices[name] = v
	c.status[name] = notImplemented
}

// parse parses args, applies the cross-flag rules that need to know which
// flags were given, and validates the result.
func (c *commandLine) parse(args []string) error {
	if err := c.fs.Parse(args); err != nil {
		return err
	}
	if n := c.fs.NArg(); n > 0 {
		return fmt.Errorf("unexpected arguments %q: every setting is a --flag", c.fs.Args())
	}
	if c.version {
		return nil
	}
	changed := func(name string) bool { return c.fs.Changed(name) }
	var errs []error
	if changed("max-empty-bulk-delete") && !changed("max-scale-down-parallelism") {
		c.opts.MaxScaleDownParallelism = c.maxEmptyBulkDelete
	}
	if c.opts.DrainPriorityConfig != "" && changed("max-graceful-termination-sec") {
		errs = append(errs, fmt.Errorf("--drain-priority-config: cannot be combined with --max-graceful-termination-sec"))
	}
	if c.estimator != "binpacking" {
		errs = append(errs, fmt.Errorf("--estimator: %q is not supported (known: [binpacking])", c.estimator))
	}
	if err := c.validateLogging(); err != nil {
		errs = append(errs, err)
	}
	if _, err := builder.HealingOptions(c.opts); err != nil {
		errs = append(errs, err)
	}
	if err := c.opts.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// staticInstanceListWarning is the start-up warning of
// --aws-use-static-instance-list=true ("" when it is not set so): upstream
// then reads no instance type from AWS; this autoscaler has no built-in list
// and reads each type a template needs with ec2:DescribeInstanceTypes.
func (c *commandLine) staticInstanceListWarning() string {
	if v := c.ignored.bools["aws-use-static-instance-list"]; v == nil || !*v {
		return ""
	}
	return "WARNING: --aws-use-static-instance-list=true has no effect: the aws provider has no built-in instance type list; " +
		"it reads each instance type a template needs with ec2:DescribeInstanceTypes (once per type, kept for the process's life), " +
		"so its IAM policy must allow that action (a refused call fails the templates of the groups at zero)"
}

// notices lists, for start-up logging, the flags the user set that this
// build accepts without acting on them, and the removed ones.
func (c *commandLine) notices() (notYet, otherProviders, removed []string) {
	c.fs.Visit(func(f *pflag.Flag) {
		switch c.status[f.Name] {
		case notImplemented, byDesign:
			notYet = append(notYet, f.Name)
		case otherProvider:
			otherProviders = append(otherProviders, f.Name)
		case removedFlag:
			removed = append(removed, f.Name)
		}
	})
	sort.Strings(notYet)
	return notYet, otherProviders, removed
}
