package crd

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// TestManifestMatchesUpstreamAPI pins the interface facts of the CRD that
// buffers written for upstream rely on: names, versions (v1beta1 stored,
// v1alpha1 still served), field names and types, the default strategy, and
// the conditions as a map keyed by type.
func TestManifestMatchesUpstreamAPI(t *testing.T) {
	crd, err := CRD()
	if err != nil {
		t.Fatal(err)
	}
	if crd.Name != Name || crd.Spec.Group != "autoscaling.x-k8s.io" || crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
		t.Errorf("name %q, group %q, scope %q", crd.Name, crd.Spec.Group, crd.Spec.Scope)
	}
	wantNames := apiextensionsv1.CustomResourceDefinitionNames{
		Kind: "CapacityBuffer", ListKind: "CapacityBufferList",
		Plural: "capacitybuffers", Singular: "capacitybuffer", ShortNames: []string{"cb"},
	}
	if diff := cmp.Diff(wantNames, crd.Spec.Names); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	if len(crd.Spec.Versions) != 2 {
		t.Fatalf("got %d versions, want v1alpha1 and v1beta1", len(crd.Spec.Versions))
	}
	alpha, beta := crd.Spec.Versions[0], crd.Spec.Versions[1]
	if alpha.Name != "v1alpha1" || !alpha.Served || alpha.Storage || !alpha.Deprecated {
		t.Errorf("v1alpha1: name %q served %v storage %v deprecated %v", alpha.Name, alpha.Served, alpha.Storage, alpha.Deprecated)
	}
	if beta.Name != "v1beta1" || !beta.Served || !beta.Storage || beta.Deprecated {
		t.Errorf("v1beta1: name %q served %v storage %v deprecated %v", beta.Name, beta.Served, beta.Storage, beta.Deprecated)
	}
	if diff := cmp.Diff(beta.Schema, alpha.Schema); diff != "" {
		t.Errorf("v1alpha1 schema differs from v1beta1 (-v1beta1 +v1alpha1):\n%s", diff)
	}
	for _, v := range crd.Spec.Versions {
		if v.Subresources == nil || v.Subresources.Status == nil || v.Subresources.Scale != nil {
			t.Errorf("%s: subresources %+v, want status only", v.Name, v.Subresources)
		}
	}

	root := beta.Schema.OpenAPIV3Schema
	if diff := cmp.Diff([]string{"spec"}, root.Required); diff != "" {
		t.Errorf("root required (-want +got):\n%s", diff)
	}
	spec := prop(t, root, "spec")
	if len(spec.Required) != 0 {
		t.Errorf("spec requires %v, want nothing", spec.Required)
	}
	strategy := prop(t, spec, "provisioningStrategy")
	if strategy.Type != "string" || strategy.Default == nil || string(strategy.Default.Raw) != `"buffer.x-k8s.io/active-capacity"` {
		t.Errorf("provisioningStrategy: type %q default %v", strategy.Type, strategy.Default)
	}
	for _, name := range []string{"replicas", "percentage"} {
		p := prop(t, spec, name)
		if p.Type != "integer" || p.Format != "int32" || p.Minimum == nil || *p.Minimum != 0 {
			t.Errorf("%s: %s/%s minimum %v, want int32 >= 0", name, p.Type, p.Format, p.Minimum)
		}
	}
	if diff := cmp.Diff([]string{"name"}, prop(t, spec, "podTemplateRef").Required); diff != "" {
		t.Errorf("podTemplateRef required (-want +got):\n%s", diff)
	}
	scalable := prop(t, spec, "scalableRef")
	if diff := cmp.Diff([]string{"kind", "name"}, scalable.Required); diff != "" {
		t.Errorf("scalableRef required (-want +got):\n%s", diff)
	}
	for _, name := range []string{"apiGroup", "kind", "name"} {
		if prop(t, scalable, name).Type != "string" {
			t.Errorf("scalableRef.%s is not a string", name)
		}
	}
	limits := prop(t, spec, "limits")
	if limits.Type != "object" || limits.AdditionalProperties == nil || !limits.AdditionalProperties.Schema.XIntOrString {
		t.Errorf("limits: %+v, want a map of quantities", limits)
	}
	if len(spec.XValidations) != 2 {
		t.Errorf("spec rules %v, want the two of upstream (refs exclusive; podTemplateRef needs replicas or limits)", spec.XValidations)
	}

	status := prop(t, root, "status")
	for name, typ := range map[string]string{"podTemplateRef": "object", "replicas": "integer",
		"podTemplateGeneration": "integer", "conditions": "array", "provisioningStrategy": "string"} {
		if got := prop(t, status, name).Type; got != typ {
			t.Errorf("status.%s: type %q, want %q", name, got, typ)
		}
	}
	conds := prop(t, status, "conditions")
	if conds.XListType == nil || *conds.XListType != "map" || !cmp.Equal(conds.XListMapKeys, []string{"type"}) {
		t.Errorf("status.conditions: list type %v keys %v, want a map keyed by type", conds.XListType, conds.XListMapKeys)
	}
}

func TestManifestIsACopy(t *testing.T) {
	m := Manifest()
	m[0] = 'X'
	if Manifest()[0] == 'X' {
		t.Error("Manifest returned the embedded bytes themselves")
	}
}

func prop(t *testing.T, s *apiextensionsv1.JSONSchemaProps, name string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	p, ok := s.Properties[name]
	if !ok {
		t.Fatalf("no property %q", name)
	}
	return &p
}
