// Package processors holds the loop's extension points: small typed
// interfaces, each called at one step of core.Autoscaler.RunOnce in the
// order of its list, and the default processors that implement them.
//
// A fork adds behaviour by writing a processor (one file) and adding it to
// the list that builder/processors.go composes (one line); the
// loop itself is not edited. See FAQ.md, "How do I extend it in my own
// build?".
//
// The steps, in the order RunOnce calls them:
//
//  1. Repairs (RepairProcessor): after cleanup, in a healthy cluster, before
//     any scale-up; a repair that changed the cluster ends the loop, as
//     cleanup does. Node healing plugs in here.
//  2. PodLists (PodListProcessor): the pending pods that reach scale-up.
//     The default list: UnschedulablePods (the pods the scheduler marked,
//     with the twins and replicas of a burst), ScaleUpDelay (too-new pods
//     wait), then the ProvisioningRequest processor's ConsumingPods (pods
//     that consume a live request are set aside), then, last, the
//     CapacityBuffer injector (pods of ready buffers, after every real pod).
//     Pods that fit existing or upcoming room are set aside by the scale-up
//     itself, first thing.
//  3. NodeGroups (NodeGroupListProcessor): node groups the scale-up must not
//     grow in this loop, on top of clusterstate's verdicts (health,
//     back-off), which always apply.
//  4. Capacity (CapacityProcessor): work done in the loop's scale-up session
//     before the ordinary pods: ProvisioningRequests book provisioned
//     capacity, answer check-capacity, and scale up all-or-nothing, one
//     equivalence group per PodSet.
//  5. ScaleUpStatus (ScaleUpStatusProcessor): told what the scale-up step
//     did, whenever the pod lists ran (events, ProvisioningRequest and
//     CapacityBuffer conditions).
//  6. ScaleDownStatus (ScaleDownStatusProcessor): told what the scale-down
//     step did.
//
// Templates are processed inside the scale-up session, per node group
// (scaleup.TemplateProcessor, given to scaleup.New with
// scaleup.WithTemplateProcessors); TemplateProcessor here names it.
//
// The expanders, the gRPC one included, are not processors: they are the
// scale-up's expander.Strategy chain, built from --expander.
//
// This package may import the step packages (scaleup, clusterstate,
// estimator) and the CapacityBuffer vocabulary (capacitybuffer); it must not import core, package main, or a concrete cloud
// provider. The ProvisioningRequest processors live in processors/provreqs,
// the CapacityBuffer ones in processors/capacitybuffers.
package processors
