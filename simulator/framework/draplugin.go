package framework

import (
	"context"
	"fmt"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

const dynamicResourcesPlugin = "DynamicResources"

// draPlugin is the framework's own DynamicResources plugin instance, called
// directly when the snapshot places a pod with claims: PreFilter and Filter
// compute the allocation on the node, Reserve hands it to the draManager,
// which writes it onto the snapshot's claim (the scheduler's PreBind
// equivalent). Only this plugin runs there: other Reserve plugins (volume
// binding) keep state outside the snapshot.
type draPlugin struct {
	preFilter fwk.PreFilterPlugin
	filter    fwk.FilterPlugin
	reserve   fwk.ReservePlugin
}

func newDRAPlugin(p fwk.Plugin) *draPlugin {
	pf, ok1 := p.(fwk.PreFilterPlugin)
	f, ok2 := p.(fwk.FilterPlugin)
	r, ok3 := p.(fwk.ReservePlugin)
	if !ok1 || !ok2 || !ok3 {
		return nil
	}
	return &draPlugin{preFilter: pf, filter: f, reserve: r}
}

// withCapturedDRAPlugin wraps the DynamicResources factory of registry so
// that the instance the framework builds (with the profile's arguments) is
// kept in *captured.
func withCapturedDRAPlugin(registry frameworkruntime.Registry) (frameworkruntime.Registry, *fwk.Plugin) {
	captured := new(fwk.Plugin)
	factory, ok := registry[dynamicResourcesPlugin]
	if !ok {
		return registry, captured
	}
	registry[dynamicResourcesPlugin] = func(ctx context.Context, args runtime.Object, fh fwk.Handle) (fwk.Plugin, error) {
		p, err := factory(ctx, args, fh)
		if err == nil {
			*captured = p
		}
		return p, err
	}
	return registry, captured
}

// pluginEnabled reports whether name runs at both PreFilter and Filter.
func pluginEnabled(enabled *schedconfig.Plugins, name string) bool {
	if enabled == nil {
		return false
	}
	in := func(set schedconfig.PluginSet) bool {
		for _, p := range set.Enabled {
			if p.Name == name {
				return true
			}
		}
		return false
	}
	return in(enabled.PreFilter) && in(enabled.Filter)
}

// claimedPod returns pod with its template claims resolved in the snapshot
// (see Snapshot.podWithClaims), or why it cannot be simulated or can never
// be scheduled (see checkAdminAccess).
func (h *Handle) claimedPod(pod *apiv1.Pod) (*apiv1.Pod, error) {
	if h.dra == nil {
		return nil, fmt.Errorf("resource claims need the %s plugin, which the scheduler profile disables", dynamicResourcesPlugin)
	}
	pod, err := h.snapshot.podWithClaims(pod)
	if err != nil {
		return nil, err
	}
	if err := h.checkAdminAccess(pod); err != nil {
		return nil, err
	}
	return pod, nil
}

// bindClaims allocates pod's claims that are not allocated yet on node
// nodeName, as kube-scheduler would (Reserve, then PreBind), and reserves
// every claim of pod for it, all on the snapshot's copies of the claims.
func (h *Handle) bindClaims(pod *apiv1.Pod, nodeName string) error {
	pod, err := h.claimedPod(pod)
	if err != nil {
		return err
	}
	ctx := h.logs.wrap(klog.NewContext(context.Background(), h.logger))
	unschedulable := func(st *fwk.Status) error {
		return &Unschedulable{Pod: pod, Node: nodeName, Plugin: dynamicResourcesPlugin, Reasons: st.Reasons()}
	}
	state := schedframework.NewCycleState()
	if _, st := h.dra.preFilter.PreFilter(ctx, state, pod, h.snapshot.list); !st.IsSuccess() {
		if st.IsSkip() {
			return nil // no claim after all
		}
		return unschedulable(st)
	}
	ni := h.snapshot.nodes[nodeName]
	if st := h.dra.filter.Filter(ctx, state, pod, ni); !st.IsSuccess() {
		return unschedulable(st)
	}
	if st := h.dra.reserve.Reserve(ctx, state, pod, nodeName); !st.IsSuccess() {
		return unschedulable(st)
	}
	for _, pc := range pod.Spec.ResourceClaims {
		name := claimNameOf(pod, pc)
		if name == "" {
			continue
		}
		if c, ok := h.snapshot.Claim(pod.Namespace, name); ok {
			h.snapshot.reserveFor(c, pod)
		}
	}
	return nil
}

// claimNameOf is the name of the claim pod's claim pc refers to, "" when
// there is none.
func claimNameOf(pod *apiv1.Pod, pc apiv1.PodResourceClaim) string {
	if pc.ResourceClaimName != nil {
		return *pc.ResourceClaimName
	}
	for _, st := range pod.Status.ResourceClaimStatuses {
		if st.Name == pc.Name && st.ResourceClaimName != nil {
			return *st.ResourceClaimName
		}
	}
	return ""
}

// placeClaimed places pods, which have resource claims, on node nodeName
// one by one while each fits (each asked with its own claims), allocating
// their claims; it returns how many it placed and why it stopped.
func (c *PodCheck) placeClaimed(ctx context.Context, shape *PodShape, pods []*apiv1.Pod, nodeName string,
	room *Request) (int, error) {
	snap := c.h.snapshot
	for i, p := range pods {
		if room != nil && !snap.HasRoom(nodeName, *room) {
			if _, err := snap.NodeInfo(nodeName); err != nil {
				return i, err
			}
			return i, &Unschedulable{Pod: p, Node: nodeName, Reasons: []string{"not enough cpu, memory or pod slots left"}}
		}
		if err := c.h.CheckPod(ctx, p, nodeName); err != nil {
			return i, err
		}
		if err := snap.AddPodShaped(shape, p, nodeName); err != nil {
			return i, err
		}
	}
	return len(pods), nil
}
