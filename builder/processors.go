package builder

import (
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/record"

	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
	"k8s.io/autoscaler/cluster-autoscaler/processors/capacitybuffers"
	"k8s.io/autoscaler/cluster-autoscaler/processors/provreqs"
)

// NewProcessors composes the loop's extension points (package processors),
// each list in the order it runs. requests is nil unless
// --enable-provisioning-requests is set, buffers unless
// --capacity-buffer-pod-injection-enabled is. A fork adds its own processor with
// one line in the list it belongs to (FAQ: "How do I extend it in my own
// build?").
func NewProcessors(opts config.Options, factory informers.SharedInformerFactory, recorder record.EventRecorder,
	requests *provreqs.Requests, buffers *capacitybuffers.Injector) processors.Set {
	// The pods the scheduler marked, with the rest of their burst.
	unschedulable := processors.UnschedulablePods{InjectionLimit: opts.PodInjectionLimit,
		AllowedSchedulers: opts.AllowedSchedulerNames, BypassedSchedulers: opts.BypassedSchedulerNames}
	var plans *processors.ReplicaPlans
	if opts.ProactiveScaleupEnabled {
		// Stand-ins for the replicas not created yet; a ReplicaSet larger
		// than --pod-injection-limit is counted in consecutive pieces: the
		// room earlier pieces got is held for them.
		plans = processors.NewReplicaPlans(opts.NodeGroupDefaults.MaxNodeProvisionTime)
		unschedulable.ReplicaSets, unschedulable.Plans = factory.Apps().V1().ReplicaSets().Lister(), plans
		// Likewise for the pods StatefulSets and Jobs create over time.
		unschedulable.StatefulSets = factory.Apps().V1().StatefulSets().Lister()
		unschedulable.Jobs = factory.Batch().V1().Jobs().Lister()
	}
	set := processors.Set{
		PodLists: []processors.PodListProcessor{
			unschedulable,
			processors.ScaleUpDelay{Delay: opts.NewPodScaleUpDelay},
		},
		ScaleUpStatus: []processors.ScaleUpStatusProcessor{processors.ScaleUpEvents{Recorder: recorder}},
	}
	if plans != nil {
		set.ScaleUpStatus = append(set.ScaleUpStatus, plans)
	}
	if requests != nil {
		set.PodLists = append(set.PodLists, requests)
		set.Capacity = append(set.Capacity, requests)
		set.ScaleUpStatus = append(set.ScaleUpStatus, requests)
	}
	if plans != nil {
		// After the ProvisioningRequests' bookings, which were promised first.
		set.Capacity = append(set.Capacity, plans)
	}
	if buffers != nil {
		// Last: the buffers' pods come after every real pending pod.
		set.PodLists = append(set.PodLists, buffers)
		set.ScaleUpStatus = append(set.ScaleUpStatus, buffers)
	}
	return set
}
