package externalgrpc

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/externalgrpc/protos"
	"k8s.io/autoscaler/cluster-autoscaler/config"
)

func toProtoOptions(o config.NodeGroupAutoscalingOptions) *protos.NodeGroupAutoscalingOptions {
	return &protos.NodeGroupAutoscalingOptions{
		ScaleDownUtilizationThreshold:    o.ScaleDownUtilizationThreshold,
		ScaleDownGpuUtilizationThreshold: o.ScaleDownGPUUtilizationThreshold,
		ZeroOrMaxNodeScaling:             o.ZeroOrMaxNodeScaling,
		IgnoreDaemonSetsUtilization:      o.IgnoreDaemonSetsUtilization,
		ScaleDownUnneededDuration:        durationpb.New(o.ScaleDownUnneededTime),
		ScaleDownUnreadyDuration:         durationpb.New(o.ScaleDownUnreadyTime),
		MaxNodeProvisionDuration:         durationpb.New(o.MaxNodeProvisionTime),
	}
}

// decodeOptions validates and translates a group's options; a nil answer
// means the defaults, and absent durations keep the defaults' values.
func decodeOptions(id string, po *protos.NodeGroupAutoscalingOptions, defaults config.NodeGroupAutoscalingOptions) (*config.NodeGroupAutoscalingOptions, error) {
	if po == nil {
		return nil, nil
	}
	o := defaults
	o.ScaleDownUtilizationThreshold = po.GetScaleDownUtilizationThreshold()
	o.ScaleDownGPUUtilizationThreshold = po.GetScaleDownGpuUtilizationThreshold()
	o.ZeroOrMaxNodeScaling = po.GetZeroOrMaxNodeScaling()
	o.IgnoreDaemonSetsUtilization = po.GetIgnoreDaemonSetsUtilization()
	for _, t := range []float64{o.ScaleDownUtilizationThreshold, o.ScaleDownGPUUtilizationThreshold} {
		if !(t >= 0 && t <= 1) {
			return nil, badAnswer("node group %q has a utilization threshold %v outside 0..1", id, t)
		}
	}
	for _, d := range []struct {
		pb  *durationpb.Duration
		dst *time.Duration
	}{
		{po.GetScaleDownUnneededDuration(), &o.ScaleDownUnneededTime},
		{po.GetScaleDownUnreadyDuration(), &o.ScaleDownUnreadyTime},
		{po.GetMaxNodeProvisionDuration(), &o.MaxNodeProvisionTime},
	} {
		if d.pb == nil {
			continue
		}
		if err := d.pb.CheckValid(); err != nil || d.pb.AsDuration() < 0 {
			return nil, badAnswer("node group %q has an invalid duration %v", id, d.pb)
		}
		*d.dst = d.pb.AsDuration()
	}
	return &o, nil
}

// pricing asks the server for prices.
type pricing struct{ p *Provider }

// NodePrice implements cloudprovider.PricingModel.
func (m pricing) NodePrice(ctx context.Context, node *apiv1.Node, start, end time.Time) (float64, error) {
	cctx, cancel := m.p.callCtx(ctx)
	defer cancel()
	resp, err := m.p.client.PricingNodePrice(cctx, &protos.PricingNodePriceRequest{Node: toProtoNode(node),
		StartTimestamp: timestamppb.New(start), EndTimestamp: timestamppb.New(end)})
	if err != nil {
		return 0, rpcError(fmt.Sprintf("pricing node %q", node.Name), err, true)
	}
	return checkPrice(resp.GetPrice())
}

// PodPrice implements cloudprovider.PricingModel.
func (m pricing) PodPrice(ctx context.Context, pod *apiv1.Pod, start, end time.Time) (float64, error) {
	b, err := pod.Marshal()
	if err != nil {
		return 0, fmt.Errorf("encoding pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	cctx, cancel := m.p.callCtx(ctx)
	defer cancel()
	resp, err := m.p.client.PricingPodPrice(cctx, &protos.PricingPodPriceRequest{PodBytes: b,
		StartTimestamp: timestamppb.New(start), EndTimestamp: timestamppb.New(end)})
	if err != nil {
		return 0, rpcError(fmt.Sprintf("pricing pod %s/%s", pod.Namespace, pod.Name), err, true)
	}
	return checkPrice(resp.GetPrice())
}

func checkPrice(v float64) (float64, error) {
	if !(v >= 0) || v > 1e12 {
		return 0, badAnswer("price %v", v)
	}
	return v, nil
}
