package core

import (
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"k8s.io/autoscaler/cluster-autoscaler/processors"
)

// LoopTrigger is what the informers' handlers ask of the loop's runner
// (*Runner): a loop now, or one batched with a burst of pods.
type LoopTrigger interface {
	Trigger()
	PodTrigger(key string)
	PodArrived(key string, counted bool)
}

// recentUnschedulable is how recently a pod must have become unschedulable
// to ask for a loop.
const recentUnschedulable = 10 * time.Second

// UnschedulablePodTrigger asks for a loop when the scheduler newly marks a
// pod unschedulable (within the last ten seconds by c, so that the
// scheduler's periodic retries of old pending pods do not keep the loop
// spinning), or a pod of a bypassed scheduler arrives; the runner batches a
// burst of them into one loop. Pods of schedulers outside allowed ask for
// nothing. A new pod for which counted is true (its workload's later pods
// are counted in full by the loop) does not extend a batch its workload is
// already in.
func UnschedulablePodTrigger(r LoopTrigger, c clock.PassiveClock, allowed, bypassed []string,
	counted func(*apiv1.Pod) bool) cache.ResourceEventHandler {
	check := func(obj any) {
		pod, ok := obj.(*apiv1.Pod)
		if !ok || len(processors.OfAllowedSchedulers([]*apiv1.Pod{pod}, allowed)) == 0 {
			return
		}
		if (processors.IsUnschedulable(pod) && recentlyUnschedulable(pod, c.Now())) ||
			processors.IsUnprocessedByBypassed(pod, bypassed) {
			r.PodTrigger(WorkloadKey(pod))
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if pod, ok := obj.(*apiv1.Pod); ok && pod.Spec.NodeName == "" && pod.Status.Phase == apiv1.PodPending &&
				len(processors.OfAllowedSchedulers([]*apiv1.Pod{pod}, allowed)) > 0 {
				r.PodArrived(WorkloadKey(pod), counted(pod))
			}
			check(obj)
		},
		UpdateFunc: func(_, obj any) {
			if pod, ok := obj.(*apiv1.Pod); ok && processors.IsUnschedulable(pod) {
				check(obj)
			}
		},
	}
}

// NodeJoinTrigger asks for a loop when a node registers or turns Ready
// while waiting is true (an all-or-nothing ProvisioningRequest waits for
// its nodes), so that the request is Provisioned within a loop's time of its
// last node, not a scan interval later. Heartbeats and other node updates
// start nothing.
func NodeJoinTrigger(r LoopTrigger, waiting func() bool) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initialList bool) {
			if _, ok := obj.(*apiv1.Node); ok && !initialList && waiting() {
				r.Trigger()
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*apiv1.Node)
			node, ok2 := newObj.(*apiv1.Node)
			if ok1 && ok2 && !nodeIsReady(old) && nodeIsReady(node) && waiting() {
				r.Trigger()
			}
		},
	}
}

func nodeIsReady(n *apiv1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == apiv1.NodeReady {
			return c.Status == apiv1.ConditionTrue
		}
	}
	return false
}

// recentlyUnschedulable reports whether pod became unschedulable within
// recentUnschedulable of now.
func recentlyUnschedulable(pod *apiv1.Pod, now time.Time) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == apiv1.PodScheduled {
			return now.Sub(c.LastTransitionTime.Time) < recentUnschedulable
		}
	}
	return false
}
