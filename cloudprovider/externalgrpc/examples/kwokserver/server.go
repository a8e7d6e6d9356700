package main

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/externalgrpc/protos"
	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// server answers the protocol from any cloudprovider.CloudProvider.
type server struct {
	protos.UnimplementedCloudProviderServer
	p cloudprovider.CloudProvider
}

func newServer(p cloudprovider.CloudProvider) *server { return &server{p: p} }

// toStatus translates a provider error: ErrNotImplemented is Unimplemented,
// an out-of-resources refusal ResourceExhausted.
func toStatus(err error) error {
	var su *cloudprovider.ScaleUpError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, cloudprovider.ErrNotImplemented):
		return status.Error(codes.Unimplemented, err.Error())
	case errors.As(err, &su) && su.Class == cloudprovider.OutOfResourcesErrorClass:
		return status.Error(codes.ResourceExhausted, err.Error())
	case cloudprovider.IsTransient(err):
		return status.Error(codes.Unavailable, err.Error())
	}
	return status.Error(codes.Unknown, err.Error())
}

func toGroup(g cloudprovider.NodeGroup) *protos.NodeGroup {
	return &protos.NodeGroup{Id: g.Id(), MinSize: int32(g.MinSize()), MaxSize: int32(g.MaxSize()), Debug: g.Debug()}
}

func fromNode(n *protos.ExternalGrpcNode) *apiv1.Node {
	node := &apiv1.Node{}
	node.Name, node.Spec.ProviderID = n.GetName(), n.GetProviderID()
	node.Labels, node.Annotations = n.GetLabels(), n.GetAnnotations()
	return node
}

func (s *server) group(ctx context.Context, id string) (cloudprovider.NodeGroup, error) {
	groups, err := s.p.NodeGroups(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	for _, g := range groups {
		if g.Id() == id {
			return g, nil
		}
	}
	return nil, status.Error(codes.NotFound, fmt.Sprintf("no node group %q", id))
}

func (s *server) NodeGroups(ctx context.Context, _ *protos.NodeGroupsRequest) (*protos.NodeGroupsResponse, error) {
	groups, err := s.p.NodeGroups(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &protos.NodeGroupsResponse{}
	for _, g := range groups {
		resp.NodeGroups = append(resp.NodeGroups, toGroup(g))
	}
	return resp, nil
}

func (s *server) NodeGroupForNode(ctx context.Context, req *protos.NodeGroupForNodeRequest) (*protos.NodeGroupForNodeResponse, error) {
	g, err := s.p.NodeGroupForNode(ctx, fromNode(req.GetNode()))
	if err != nil {
		return nil, toStatus(err)
	}
	if g == nil {
		return &protos.NodeGroupForNodeResponse{NodeGroup: &protos.NodeGroup{}}, nil
	}
	return &protos.NodeGroupForNodeResponse{NodeGroup: toGroup(g)}, nil
}

func (s *server) GPULabel(context.Context, *protos.GPULabelRequest) (*protos.GPULabelResponse, error) {
	return &protos.GPULabelResponse{Label: s.p.GPULabel()}, nil
}

func (s *server) GetAvailableGPUTypes(ctx context.Context, _ *protos.GetAvailableGPUTypesRequest) (*protos.GetAvailableGPUTypesResponse, error) {
	return &protos.GetAvailableGPUTypesResponse{}, nil
}

func (s *server) Refresh(ctx context.Context, _ *protos.RefreshRequest) (*protos.RefreshResponse, error) {
	return &protos.RefreshResponse{}, toStatus(s.p.Refresh(ctx))
}

func (s *server) Cleanup(ctx context.Context, _ *protos.CleanupRequest) (*protos.CleanupResponse, error) {
	return &protos.CleanupResponse{}, nil // the server's own shutdown saves the state
}

func (s *server) NodeGroupTargetSize(ctx context.Context, req *protos.NodeGroupTargetSizeRequest) (*protos.NodeGroupTargetSizeResponse, error) {
	g, err := s.group(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	n, err := g.TargetSize(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return &protos.NodeGroupTargetSizeResponse{TargetSize: int32(n)}, nil
}

func (s *server) NodeGroupIncreaseSize(ctx context.Context, req *protos.NodeGroupIncreaseSizeRequest) (*protos.NodeGroupIncreaseSizeResponse, error) {
	g, err := s.group(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	return &protos.NodeGroupIncreaseSizeResponse{}, toStatus(g.IncreaseSize(ctx, int(req.GetDelta())))
}

func (s *server) NodeGroupDeleteNodes(ctx context.Context, req *protos.NodeGroupDeleteNodesRequest) (*protos.NodeGroupDeleteNodesResponse, error) {
	g, err := s.group(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	nodes := make([]*apiv1.Node, 0, len(req.GetNodes()))
	for _, n := range req.GetNodes() {
		nodes = append(nodes, fromNode(n))
	}
	return &protos.NodeGroupDeleteNodesResponse{}, toStatus(g.DeleteNodes(ctx, nodes))
}

func (s *server) NodeGroupDecreaseTargetSize(ctx context.Context, req *protos.NodeGroupDecreaseTargetSizeRequest) (*protos.NodeGroupDecreaseTargetSizeResponse, error) {
	g, err := s.group(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	return &protos.NodeGroupDecreaseTargetSizeResponse{}, toStatus(g.DecreaseTargetSize(ctx, int(req.GetDelta())))
}

func (s *server) NodeGroupNodes(ctx context.Context, req *protos.NodeGroupNodesRequest) (*protos.NodeGroupNodesResponse, error) {
	g, err := s.group(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	ins, err := g.Nodes(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &protos.NodeGroupNodesResponse{Instances: make([]*protos.Instance, 0, len(ins))}
	for _, in := range ins {
		pi := &protos.Instance{Id: in.Id}
		if st := in.Status; st != nil {
			pi.Status = &protos.InstanceStatus{InstanceState: protos.InstanceStatus_InstanceState(st.State)}
			if ei := st.ErrorInfo; ei != nil {
				pi.Status.ErrorInfo = &protos.InstanceErrorInfo{ErrorCode: ei.ErrorCode, ErrorMessage: ei.ErrorMessage,
					InstanceErrorClass: int32(ei.ErrorClass)}
			}
		}
		resp.Instances = append(resp.Instances, pi)
	}
	return resp, nil
}

func (s *server) NodeGroupTemplateNodeInfo(ctx context.Context, req *protos.NodeGroupTemplateNodeInfoRequest) (*protos.NodeGroupTemplateNodeInfoResponse, error) {
	g, err := s.group(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	ni, err := g.TemplateNodeInfo(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	b, err := ni.Node.Marshal()
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &protos.NodeGroupTemplateNodeInfoResponse{NodeBytes: b}, nil
}

func (s *server) NodeGroupGetOptions(ctx context.Context, req *protos.NodeGroupAutoscalingOptionsRequest) (*protos.NodeGroupAutoscalingOptionsResponse, error) {
	g, err := s.group(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	d := req.GetDefaults()
	defaults := config.NodeGroupAutoscalingOptions{
		ScaleDownUtilizationThreshold:    d.GetScaleDownUtilizationThreshold(),
		ScaleDownGPUUtilizationThreshold: d.GetScaleDownGpuUtilizationThreshold(),
		ZeroOrMaxNodeScaling:             d.GetZeroOrMaxNodeScaling(),
		IgnoreDaemonSetsUtilization:      d.GetIgnoreDaemonSetsUtilization(),
		ScaleDownUnneededTime:            d.GetScaleDownUnneededDuration().AsDuration(),
		ScaleDownUnreadyTime:             d.GetScaleDownUnreadyDuration().AsDuration(),
		MaxNodeProvisionTime:             d.GetMaxNodeProvisionDuration().AsDuration(),
	}
	o, err := g.GetOptions(ctx, defaults)
	if err != nil {
		return nil, toStatus(err)
	}
	if o == nil {
		return &protos.NodeGroupAutoscalingOptionsResponse{}, nil
	}
	return &protos.NodeGroupAutoscalingOptionsResponse{NodeGroupAutoscalingOptions: &protos.NodeGroupAutoscalingOptions{
		ScaleDownUtilizationThreshold:    o.ScaleDownUtilizationThreshold,
		ScaleDownGpuUtilizationThreshold: o.ScaleDownGPUUtilizationThreshold,
		ZeroOrMaxNodeScaling:             o.ZeroOrMaxNodeScaling,
		IgnoreDaemonSetsUtilization:      o.IgnoreDaemonSetsUtilization,
		ScaleDownUnneededDuration:        durationpb.New(o.ScaleDownUnneededTime),
		ScaleDownUnreadyDuration:         durationpb.New(o.ScaleDownUnreadyTime),
		MaxNodeProvisionDuration:         durationpb.New(o.MaxNodeProvisionTime),
	}}, nil
}
