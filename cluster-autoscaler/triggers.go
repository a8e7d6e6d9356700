package main

import (
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"k8s.io/autoscaler/cluster-autoscaler/core"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
)

// unschedulablePodTrigger asks for a loop when the scheduler newly marks a pod
// unschedulable, or a pod of a bypassed scheduler arrives; the runner
// batches a burst of them into one loop. Pods of schedulers outside
// --allowed-scheduler-names ask for nothing. A new pod for which counted is
// true (its workload's later pods are counted in full by the loop) does not
// extend a batch its workload is already in.
func unschedulablePodTrigger(r *core.Runner, allowed, bypassed []string, counted func(*apiv1.Pod) bool) cache.ResourceEventHandler {
	check := func(obj any) {
		pod, ok := obj.(*apiv1.Pod)
		if !ok || len(processors.OfAllowedSchedulers([]*apiv1.Pod{pod}, allowed)) == 0 {
			return
		}
		if (processors.IsUnschedulable(pod) && recentlyUnschedulable(pod, time.Now())) ||
			processors.IsUnprocessedByBypassed(pod, bypassed) {
			r.PodTrigger(core.WorkloadKey(pod))
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if pod, ok := obj.(*apiv1.Pod); ok && pod.Spec.NodeName == "" && pod.Status.Phase == apiv1.PodPending &&
				len(processors.OfAllowedSchedulers([]*apiv1.Pod{pod}, allowed)) > 0 {
				r.PodArrived(core.WorkloadKey(pod), counted(pod))
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

// nodeJoinTrigger asks for a loop when a node registers or turns Ready
// while an all-or-nothing ProvisioningRequest waits for its nodes, so that
// the request is Provisioned within a loop's time of its last node, not a
// scan interval later. Heartbeats and other node updates start nothing.
func nodeJoinTrigger(r *core.Runner, waiting func() bool) cache.ResourceEventHandler {
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

// recentlyUnschedulable reports whether pod became unschedulable within the
// last ten seconds, so that the scheduler's periodic retries of old pending
// pods do not keep the loop spinning.
func recentlyUnschedulable(pod *apiv1.Pod, now time.Time) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == apiv1.PodScheduled {
			return now.Sub(c.LastTransitionTime.Time) < 10*time.Second
		}
	}
	return false
}
