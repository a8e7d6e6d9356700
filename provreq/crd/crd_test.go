package crd

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

const dnsSubdomain = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`

var immutable = apiextensionsv1.ValidationRules{{Rule: "self == oldSelf", Message: "Value is immutable"}}

// TestManifestMatchesUpstreamAPI pins the interface facts of the CRD: the
// names, versions and the limits of every field, as the upstream API has
// them, so a regeneration cannot drift from it unnoticed.
func TestManifestMatchesUpstreamAPI(t *testing.T) {
	crd, err := CRD()
	if err != nil {
		t.Fatal(err)
	}
	if crd.Name != Name || crd.Spec.Group != "autoscaling.x-k8s.io" || crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
		t.Errorf("name %q, group %q, scope %q", crd.Name, crd.Spec.Group, crd.Spec.Scope)
	}
	wantNames := apiextensionsv1.CustomResourceDefinitionNames{
		Kind: "ProvisioningRequest", ListKind: "ProvisioningRequestList",
		Plural: "provisioningrequests", Singular: "provisioningrequest",
		ShortNames: []string{"provreq", "provreqs"},
	}
	if diff := cmp.Diff(wantNames, crd.Spec.Names); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	if len(crd.Spec.Versions) != 2 {
		t.Fatalf("got %d versions, want v1 and v1beta1", len(crd.Spec.Versions))
	}
	v1, v1beta1 := crd.Spec.Versions[0], crd.Spec.Versions[1]
	if v1.Name != "v1" || !v1.Served || !v1.Storage || v1.Deprecated {
		t.Errorf("v1: name %q served %v storage %v deprecated %v", v1.Name, v1.Served, v1.Storage, v1.Deprecated)
	}
	if v1beta1.Name != "v1beta1" || !v1beta1.Served || v1beta1.Storage || !v1beta1.Deprecated ||
		v1beta1.DeprecationWarning == nil || *v1beta1.DeprecationWarning != "autoscaling.k8s.io/v1beta1 API is deprecated" {
		t.Errorf("v1beta1: name %q served %v storage %v deprecated %v warning %v",
			v1beta1.Name, v1beta1.Served, v1beta1.Storage, v1beta1.Deprecated, v1beta1.DeprecationWarning)
	}
	if diff := cmp.Diff(v1.Schema, v1beta1.Schema); diff != "" {
		t.Errorf("v1beta1 schema differs from v1 (-v1 +v1beta1):\n%s", diff)
	}
	wantColumns := []apiextensionsv1.CustomResourceColumnDefinition{{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"}}
	for _, v := range crd.Spec.Versions {
		if v.Subresources == nil || v.Subresources.Status == nil || v.Subresources.Scale != nil {
			t.Errorf("%s: subresources %+v, want status only", v.Name, v.Subresources)
		}
		if diff := cmp.Diff(wantColumns, v.AdditionalPrinterColumns); diff != "" {
			t.Errorf("%s printer columns (-want +got):\n%s", v.Name, diff)
		}
	}

	root := v1.Schema.OpenAPIV3Schema
	checkRequired(t, "root", root, "spec")
	spec := prop(t, root, "spec")
	checkRequired(t, "spec", spec, "podSets", "provisioningClassName")

	podSets := prop(t, spec, "podSets")
	if podSets.MinItems == nil || *podSets.MinItems != 1 || podSets.MaxItems == nil || *podSets.MaxItems != 32 {
		t.Errorf("podSets min/max items %v/%v, want 1/32", podSets.MinItems, podSets.MaxItems)
	}
	checkRules(t, "podSets", podSets, immutable)
	podSet := podSets.Items.Schema
	checkRequired(t, "podSet", podSet, "count", "podTemplateRef")
	count := prop(t, podSet, "count")
	if count.Type != "integer" || count.Format != "int32" || count.Minimum == nil || *count.Minimum != 1 || count.Maximum != nil {
		t.Errorf("count: %s/%s min %v max %v, want int32 >= 1 with no maximum", count.Type, count.Format, count.Minimum, count.Maximum)
	}
	ref := prop(t, podSet, "podTemplateRef")
	checkRequired(t, "podTemplateRef", ref, "name")
	checkString(t, "podTemplateRef.name", prop(t, ref, "name"), 253, dnsSubdomain)

	class := prop(t, spec, "provisioningClassName")
	checkString(t, "provisioningClassName", class, 253, dnsSubdomain)
	checkRules(t, "provisioningClassName", class, immutable)

	params := prop(t, spec, "parameters")
	if params.MaxProperties == nil || *params.MaxProperties != 100 {
		t.Errorf("parameters maxProperties %v, want 100", params.MaxProperties)
	}
	checkRules(t, "parameters", params, immutable)
	checkString(t, "parameters value", params.AdditionalProperties.Schema, 255, "")

	status := prop(t, root, "status")
	checkRequired(t, "status", status)
	conds := prop(t, status, "conditions")
	if conds.XListType == nil || *conds.XListType != "map" || !cmp.Equal(conds.XListMapKeys, []string{"type"}) {
		t.Errorf("status.conditions: list type %v keys %v, want a map keyed by type", conds.XListType, conds.XListMapKeys)
	}
	cond := conds.Items.Schema
	checkRequired(t, "condition", cond, "lastTransitionTime", "message", "reason", "status", "type")
	checkString(t, "condition.type", prop(t, cond, "type"), 316,
		`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$`)
	checkString(t, "condition.reason", prop(t, cond, "reason"), 1024, `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`)
	checkString(t, "condition.message", prop(t, cond, "message"), 32768, "")

	details := prop(t, status, "provisioningClassDetails")
	if details.MaxProperties == nil || *details.MaxProperties != 64 {
		t.Errorf("provisioningClassDetails maxProperties %v, want 64", details.MaxProperties)
	}
	checkString(t, "provisioningClassDetails value", details.AdditionalProperties.Schema, 32768, "")
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

func checkRequired(t *testing.T, what string, s *apiextensionsv1.JSONSchemaProps, want ...string) {
	t.Helper()
	if diff := cmp.Diff(want, s.Required, cmpEmpty); diff != "" {
		t.Errorf("%s required (-want +got):\n%s", what, diff)
	}
}

var cmpEmpty = cmp.FilterValues(func(a, b []string) bool { return len(a) == 0 && len(b) == 0 }, cmp.Ignore())

func checkString(t *testing.T, what string, s *apiextensionsv1.JSONSchemaProps, maxLength int64, pattern string) {
	t.Helper()
	if s.Type != "string" || s.MaxLength == nil || *s.MaxLength != maxLength || s.Pattern != pattern {
		t.Errorf("%s: type %q maxLength %v pattern %q; want string, %d, %q", what, s.Type, s.MaxLength, s.Pattern, maxLength, pattern)
	}
}

func checkRules(t *testing.T, what string, s *apiextensionsv1.JSONSchemaProps, want apiextensionsv1.ValidationRules) {
	t.Helper()
	if diff := cmp.Diff(want, s.XValidations); diff != "" {
		t.Errorf("%s validation rules (-want +got):\n%s", what, diff)
	}
}
