package aws

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestParseTemplateTags(t *testing.T) {
	cases := []struct {
		name    string
		tags    map[string]string
		want    templateSpec
		wantErr string
	}{
		{
			name: "labels, taints, resources; other tags ignored",
			tags: map[string]string{
				LabelTagPrefix + "team":                  "ml",
				LabelTagPrefix + "example.com/pool":      "gpu",
				TaintTagPrefix + "dedicated":             "ml:NoSchedule",
				TaintTagPrefix + "example.com/spot":      ":PreferNoSchedule",
				ResourceTagPrefix + "ephemeral-storage":  "100Gi",
				ResourceTagPrefix + "example.com/dongle": "2",
				"k8s.io/cluster-autoscaler/enabled":      "true",
				"Name":                                   "x",
			},
			want: templateSpec{
				Labels: map[string]string{"team": "ml", "example.com/pool": "gpu"},
				Taints: []apiv1.Taint{{Key: "dedicated", Value: "ml", Effect: apiv1.TaintEffectNoSchedule},
					{Key: "example.com/spot", Effect: apiv1.TaintEffectPreferNoSchedule}},
				Resources: apiv1.ResourceList{"ephemeral-storage": resource.MustParse("100Gi"), "example.com/dongle": resource.MustParse("2")},
			},
		},
		{name: "taint without effect", tags: map[string]string{TaintTagPrefix + "a": "b"}, wantErr: "want <value>:<effect>"},
		{name: "taint with unknown effect", tags: map[string]string{TaintTagPrefix + "a": "b:Never"}, wantErr: `effect "Never"`},
		{name: "bad label key", tags: map[string]string{LabelTagPrefix + "a b": "c"}, wantErr: "label key"},
		{name: "bad label value", tags: map[string]string{LabelTagPrefix + "a": "c d"}, wantErr: "label value"},
		{name: "bad quantity", tags: map[string]string{ResourceTagPrefix + "x": "lots"}, wantErr: "not a non-negative quantity"},
		{name: "negative quantity", tags: map[string]string{ResourceTagPrefix + "x": "-1"}, wantErr: "not a non-negative quantity"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseTemplateTags(tc.tags)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("spec (-want +got):\n%s", d)
			}
		})
	}
}

func TestBuildTemplate(t *testing.T) {
	m5 := instanceType{Name: "m5.large", VCPU: 2, MemoryMiB: 8192, Arch: "amd64", MaxPods: 29}
	g4 := instanceType{Name: "g4dn.xlarge", VCPU: 4, MemoryMiB: 16384, Arch: "amd64", GPUs: 1, GPUManufacturer: "NVIDIA", GPUName: "T4", MaxPods: 29}
	cases := []struct {
		name       string
		in         templateInput
		wantLabels map[string]string
		wantCap    map[apiv1.ResourceName]string
		wantTaints []apiv1.Taint
	}{
		{
			name: "plain instance type",
			in:   templateInput{Group: "ng", Region: "us-east-1", Zone: "us-east-1a", Type: m5},
			wantLabels: map[string]string{"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
				"node.kubernetes.io/instance-type": "m5.large", "topology.kubernetes.io/zone": "us-east-1a",
				"topology.kubernetes.io/region": "us-east-1", EBSZoneLabel: "us-east-1a"},
			wantCap: map[apiv1.ResourceName]string{"cpu": "2", "memory": "8Gi", "pods": "29"},
		},
		{
			name: "GPU type; tags override labels and add resources and taints",
			in: templateInput{Group: "gpu", Region: "us-east-1", Zone: "us-east-1b", Type: g4, Tags: map[string]string{
				LabelTagPrefix + "topology.kubernetes.io/zone": "us-east-1c",
				ResourceTagPrefix + "pods":                     "58",
				TaintTagPrefix + "nvidia.com/gpu":              "present:NoSchedule",
			}},
			wantLabels: map[string]string{GPULabel: "nvidia-t4", "topology.kubernetes.io/zone": "us-east-1c",
				"node.kubernetes.io/instance-type": "g4dn.xlarge"},
			wantCap:    map[apiv1.ResourceName]string{"cpu": "4", "memory": "16Gi", "pods": "58", "nvidia.com/gpu": "1"},
			wantTaints: []apiv1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: apiv1.TaintEffectNoSchedule}},
		},
		{
			name:       "no ENI facts: 110 pods; arm64",
			in:         templateInput{Group: "arm", Region: "eu-west-1", Type: instanceType{Name: "m6g.large", VCPU: 2, MemoryMiB: 8192, Arch: "arm64"}},
			wantLabels: map[string]string{"kubernetes.io/arch": "arm64"},
			wantCap:    map[apiv1.ResourceName]string{"pods": "110"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			node, err := buildTemplate(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.wantLabels {
				if got := node.Labels[k]; got != v {
					t.Errorf("label %s = %q, want %q", k, got, v)
				}
			}
			for r, v := range tc.wantCap {
				q := node.Status.Capacity[r]
				if q.Cmp(resource.MustParse(v)) != 0 {
					t.Errorf("capacity %s = %s, want %s", r, q.String(), v)
				}
				a := node.Status.Allocatable[r]
				if a.Cmp(q) != 0 {
					t.Errorf("allocatable %s = %s, want the capacity %s", r, a.String(), q.String())
				}
			}
			if d := cmp.Diff(tc.wantTaints, node.Spec.Taints); d != "" {
				t.Errorf("taints (-want +got):\n%s", d)
			}
			if _, has := tc.wantLabels["topology.kubernetes.io/zone"]; !has && tc.in.Zone == "" {
				for _, k := range []string{"topology.kubernetes.io/zone", EBSZoneLabel} {
					if z, ok := node.Labels[k]; ok {
						t.Errorf("zone label %s=%q without a zone", k, z)
					}
				}
			}
		})
	}
}

func TestBuildTemplateRefusesBadTags(t *testing.T) {
	_, err := buildTemplate(templateInput{Group: "ng", Type: instanceType{Name: "m5.large", VCPU: 2, MemoryMiB: 8192, Arch: "amd64"},
		Tags: map[string]string{TaintTagPrefix + "x": "nothing"}})
	if err == nil || !strings.Contains(err.Error(), `Auto Scaling group "ng"`) {
		t.Fatalf("error = %v, want one naming the group", err)
	}
}
