package clusterapi

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

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

// TestTemplateFromInfrastructureTemplate: without capacity annotations the
// template comes from the infrastructure machine template's status.capacity
// and status.nodeInfo (found through a RESTMapper by the group's
// infrastructureRef); annotations override it key by key.
func TestTemplateFromInfrastructureTemplate(t *testing.T) {
	infraGVR := schema.GroupVersionResource{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta1", Resource: "testmachinetemplates"}
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{infraGVR.GroupVersion()})
	mapper.Add(schema.GroupVersionKind{Group: infraGVR.Group, Version: infraGVR.Version, Kind: "TestMachineTemplate"}, meta.RESTScopeNamespace)
	infra := func(capacity map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": infraGVR.Group + "/" + infraGVR.Version, "kind": "TestMachineTemplate",
			"metadata": map[string]any{"namespace": "ns", "name": "tmpl"},
			"status": map[string]any{"capacity": capacity,
				"nodeInfo": map[string]any{"architecture": "arm64", "operatingSystem": "linux"}},
		}}
		return u
	}
	tests := []struct {
		name     string
		ref      map[string]any
		ann      map[string]string
		template *unstructured.Unstructured
		wantErr  string
		want     map[apiv1.ResourceName]string
	}{
		{name: "status.capacity (v1beta2 reference)",
			ref:      map[string]any{"apiGroup": infraGVR.Group, "kind": "TestMachineTemplate", "name": "tmpl"},
			template: infra(map[string]any{"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1", "pods": "58"}),
			want:     map[apiv1.ResourceName]string{"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1", "pods": "58"}},
		{name: "annotations win (v1beta1 reference)",
			ref:      map[string]any{"apiVersion": infraGVR.Group + "/v1beta1", "kind": "TestMachineTemplate", "name": "tmpl"},
			ann:      map[string]string{CPUAnnotation: "2", MaxPodsAnnotation: "20"},
			template: infra(map[string]any{"cpu": "8", "memory": "32Gi"}),
			want:     map[apiv1.ResourceName]string{"cpu": "2", "memory": "32Gi", "pods": "20"}},
		{name: "bad quantity in status.capacity",
			ref:      map[string]any{"apiGroup": infraGVR.Group, "kind": "TestMachineTemplate", "name": "tmpl"},
			template: infra(map[string]any{"cpu": "eight", "memory": "32Gi"}), wantErr: "status.capacity.cpu"},
		{name: "template not found: copy a node",
			ref:     map[string]any{"apiGroup": infraGVR.Group, "kind": "TestMachineTemplate", "name": "gone"},
			wantErr: "not implemented"},
		{name: "unknown kind: copy a node",
			ref:     map[string]any{"apiGroup": infraGVR.Group, "kind": "Other", "name": "tmpl"},
			wantErr: "not implemented"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := makeObj(kindMachineDeployment, "ns", "md").sizes("0", "3").replicas(0).
				set(tc.ref, "spec", "template", "spec", "infrastructureRef")
			for k, v := range tc.ann {
				o.ann(k, v)
			}
			client, _ := newFake(t, o)
			if tc.template != nil {
				if _, err := client.Resource(infraGVR).Namespace("ns").Create(context.Background(), tc.template, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			p := New(client, DefaultGroup, testVersion, WithRESTMapper(mapper))
			if err := p.Refresh(context.Background()); err != nil {
				t.Fatal(err)
			}
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
			got := map[apiv1.ResourceName]string{}
			for k, v := range ni.Node.Status.Allocatable {
				got[k] = v.String()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("allocatable (-want +got):\n%s", diff)
			}
			if ni.Node.Labels["kubernetes.io/arch"] != "arm64" {
				t.Errorf("arch label = %q, want the template's arm64", ni.Node.Labels["kubernetes.io/arch"])
			}
		})
	}
}

// TestInfrastructureTemplateIsCachedForAMinute: the template is read once
// per minute, not once per group and loop.
func TestInfrastructureTemplateIsCachedForAMinute(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta1", Resource: "testmachinetemplates"}
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{gvr.GroupVersion()})
	mapper.Add(gvr.GroupVersion().WithKind("TestMachineTemplate"), meta.RESTScopeNamespace)
	o := makeObj(kindMachineDeployment, "ns", "md").sizes("0", "3").replicas(0).
		set(map[string]any{"apiGroup": gvr.Group, "kind": "TestMachineTemplate", "name": "tmpl"}, "spec", "template", "spec", "infrastructureRef")
	client, _ := newFake(t, o)
	tmpl := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(), "kind": "TestMachineTemplate",
		"metadata": map[string]any{"namespace": "ns", "name": "tmpl"},
		"status":   map[string]any{"capacity": map[string]any{"cpu": "4", "memory": "8Gi"}},
	}}
	ctx := context.Background()
	if _, err := client.Resource(gvr).Namespace("ns").Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p := New(client, DefaultGroup, testVersion, WithRESTMapper(mapper), WithClock(clk))
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	cpu := func() string {
		t.Helper()
		ni, err := onlyGroup(t, p).TemplateNodeInfo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ni.Node.Status.Capacity.Cpu().String()
	}
	if got := cpu(); got != "4" {
		t.Fatalf("cpu = %s, want 4", got)
	}
	_ = unstructured.SetNestedField(tmpl.Object, "16", "status", "capacity", "cpu")
	if _, err := client.Resource(gvr).Namespace("ns").Update(ctx, tmpl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(clk.Now().Add(30 * time.Second))
	if got := cpu(); got != "4" {
		t.Errorf("cpu = %s 30s later, want the cached 4", got)
	}
	clk.SetTime(clk.Now().Add(31 * time.Second))
	if got := cpu(); got != "16" {
		t.Errorf("cpu = %s after a minute, want the re-read 16", got)
	}
}

// TestTemplateTaintsFromSpec: the taints of spec.template.spec.taints
// (Cluster API v1.12's MachineTaintPropagation) are the template's, in
// order, their propagation not looked at; a taints-annotation taint of the
// same key and effect replaces one in place, the others are added after;
// an entry without a key or with an unknown effect is left out.
func TestTemplateTaintsFromSpec(t *testing.T) {
	spec := []any{
		map[string]any{"key": "dedicated", "value": "gpu", "effect": "NoSchedule", "propagation": "Always"},
		map[string]any{"key": "spot", "effect": "PreferNoSchedule", "propagation": "OnInitialization"},
		map[string]any{"key": "dedicated", "value": "gpu", "effect": "NoExecute"},
		map[string]any{"value": "nokey", "effect": "NoSchedule"},
		map[string]any{"key": "bad", "effect": "Never"},
	}
	tests := []struct {
		name   string
		spec   []any
		taints string // the taints annotation; "" for none
		want   []apiv1.Taint
	}{
		{name: "neither", want: nil},
		{name: "spec only", spec: spec, want: []apiv1.Taint{
			{Key: "dedicated", Value: "gpu", Effect: apiv1.TaintEffectNoSchedule},
			{Key: "spot", Effect: apiv1.TaintEffectPreferNoSchedule},
			{Key: "dedicated", Value: "gpu", Effect: apiv1.TaintEffectNoExecute},
		}},
		{name: "annotation only", taints: "a=b:NoSchedule", want: []apiv1.Taint{{Key: "a", Value: "b", Effect: apiv1.TaintEffectNoSchedule}}},
		{name: "annotation wins on key and effect", spec: spec, taints: "dedicated=override:NoSchedule,extra:NoExecute", want: []apiv1.Taint{
			{Key: "dedicated", Value: "override", Effect: apiv1.TaintEffectNoSchedule},
			{Key: "spot", Effect: apiv1.TaintEffectPreferNoSchedule},
			{Key: "dedicated", Value: "gpu", Effect: apiv1.TaintEffectNoExecute},
			{Key: "extra", Effect: apiv1.TaintEffectNoExecute},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := makeObj(kindMachineDeployment, "ns", "md").sizes("0", "3").replicas(0).
				ann(CPUAnnotation, "2").ann(MemoryAnnotation, "8Gi")
			if tc.spec != nil {
				o.set(tc.spec, "spec", "template", "spec", "taints")
			}
			if tc.taints != "" {
				o.ann(TaintsAnnotation, tc.taints)
			}
			p, _ := newProvider(t, nil, o)
			ni, err := onlyGroup(t, p).TemplateNodeInfo(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, ni.Node.Spec.Taints); diff != "" {
				t.Errorf("taints (-want +got):\n%s", diff)
			}
		})
	}
}
