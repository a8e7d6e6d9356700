package clusterapi

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

func TestTemplateNode(t *testing.T) {
	tests := []struct {
		name    string
		ann     map[string]string
		wantErr string
		check   func(t *testing.T, n *apiv1.Node)
	}{
		{name: "no annotations", ann: map[string]string{}, wantErr: "not implemented"},
		{name: "cpu only", ann: map[string]string{CPUAnnotation: "2"}, wantErr: "not implemented"},
		{name: "full", ann: map[string]string{
			CPUAnnotation: "4", MemoryAnnotation: "16G", DiskAnnotation: "100Gi", MaxPodsAnnotation: "58",
			GPUTypeAnnotation: "nvidia.com/gpu", GPUCountAnnotation: "2",
			LabelsAnnotation: "pool=gpu, zone=a", TaintsAnnotation: "gpu=true:NoSchedule,dedicated:NoExecute",
		}, check: func(t *testing.T, n *apiv1.Node) {
			c := n.Status.Allocatable
			if c.Cpu().String() != "4" || c.Memory().String() != "16G" || c.Pods().Value() != 58 ||
				c.StorageEphemeral().String() != "100Gi" {
				t.Errorf("allocatable = %v", c)
			}
			if q := c[apiv1.ResourceName("nvidia.com/gpu")]; q.Value() != 2 {
				t.Errorf("gpus = %v", q.String())
			}
			if n.Labels["pool"] != "gpu" || n.Labels["zone"] != "a" || n.Labels["kubernetes.io/os"] != "linux" {
				t.Errorf("labels = %v", n.Labels)
			}
			want := []apiv1.Taint{{Key: "gpu", Value: "true", Effect: apiv1.TaintEffectNoSchedule}, {Key: "dedicated", Effect: apiv1.TaintEffectNoExecute}}
			if diff := cmp.Diff(want, n.Spec.Taints); diff != "" {
				t.Errorf("taints (-want +got):\n%s", diff)
			}
		}},
		{name: "default max pods", ann: map[string]string{CPUAnnotation: "1", MemoryAnnotation: "1Gi"},
			check: func(t *testing.T, n *apiv1.Node) {
				if n.Status.Capacity.Pods().Value() != 110 {
					t.Errorf("pods = %v", n.Status.Capacity.Pods())
				}
			}},
		{name: "bad cpu", ann: map[string]string{CPUAnnotation: "lots", MemoryAnnotation: "1Gi"}, wantErr: "cpu"},
		{name: "negative memory", ann: map[string]string{CPUAnnotation: "1", MemoryAnnotation: "-1Gi"}, wantErr: "negative"},
		{name: "bad max pods", ann: map[string]string{CPUAnnotation: "1", MemoryAnnotation: "1Gi", MaxPodsAnnotation: "many"}, wantErr: "maxPods"},
		{name: "bad gpu count", ann: map[string]string{CPUAnnotation: "1", MemoryAnnotation: "1Gi", GPUCountAnnotation: "-1"}, wantErr: "gpu-count"},
		{name: "bad label", ann: map[string]string{CPUAnnotation: "1", MemoryAnnotation: "1Gi", LabelsAnnotation: "novalue"}, wantErr: "labels"},
		{name: "bad taint effect", ann: map[string]string{CPUAnnotation: "1", MemoryAnnotation: "1Gi", TaintsAnnotation: "a=b:Never"}, wantErr: "unknown effect"},
		{name: "taint without effect", ann: map[string]string{CPUAnnotation: "1", MemoryAnnotation: "1Gi", TaintsAnnotation: "a=b"}, wantErr: "taints"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := makeObj(kindMachineDeployment, "ns", "md").sizes("0", "3").replicas(0)
			for k, v := range tc.ann {
				o.ann(k, v)
			}
			p, _ := newProvider(t, nil, o)
			ni, err := onlyGroup(t, p).TemplateNodeInfo(context.Background())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				if tc.wantErr == "not implemented" && !errors.Is(err, cloudprovider.ErrNotImplemented) {
					t.Errorf("err = %v is not ErrNotImplemented", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, ni.Node)
		})
	}
}
